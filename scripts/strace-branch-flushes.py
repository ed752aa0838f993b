#!/usr/bin/env python3
"""The flushes of one `/v1` branch creation: a `cambium up` of binary argv[1] (API on port argv[2], PostgreSQL on
the next) on a fresh data directory, a project, a database, three warm creations, then `strace -f -tt -T -y -e
trace=fsync,fdatasync` attached and one creation timed. Prints the flush calls started between the request and
its reply (the reply's path), with their files, and how many came in the second after. Needs strace.

    scripts/strace-branch-flushes.py target/release/cambium 47100
"""
import http.client, json, os, signal, subprocess, sys, tempfile, time, datetime

binary, port = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp(prefix="apiflush-strace-")
proc = subprocess.Popen([binary, "up", "--data-dir", d, "--listen", f"127.0.0.1:{port}", "--pg-listen",
                         f"127.0.0.1:{port + 1}", "--rate-limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
proc.stdout.readline()
key = open(f"{d}/api_key").read().strip()
conn = http.client.HTTPConnection("127.0.0.1", port)
def call(method, path, body=None):
    headers = {"Authorization": f"Bearer {key}"}
    data = None
    if body is not None:
        data = json.dumps(body); headers["content-type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse(); text = r.read()
    assert r.status in (200, 201, 202, 204), (r.status, text)
    return json.loads(text) if text else None
p = call("POST", "/v1/projects", {"name": "p"})["project"]["id"]
db = call("POST", f"/v1/projects/{p}/databases", {"name": "d"})
call("GET", f"/v1/operations/{db['operation']['id']}?wait=30s")
dbid = db["database"]["id"]
for i in range(3):
    call("POST", f"/v1/databases/{dbid}/branches", {"name": f"warm{i}"})
time.sleep(2)
out = f"{d}/strace.txt"
st = subprocess.Popen(["strace", "-f", "-tt", "-T", "-y", "-e", "trace=fsync,fdatasync", "-p", str(proc.pid), "-o", out],
                      stderr=subprocess.DEVNULL)
time.sleep(1.5)
t0 = time.time()
call("POST", f"/v1/databases/{dbid}/branches", {"name": "measured"})
t1 = time.time()
time.sleep(1.0)
st.send_signal(signal.SIGINT); st.wait()
proc.send_signal(signal.SIGINT)
try:
    proc.wait(10)
except Exception:
    proc.kill()
def ts(line):
    parts = line.split()
    h, m, s = parts[1].split(":")
    day = datetime.datetime.fromtimestamp(t0).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    return day + int(h) * 3600 + int(m) * 60 + float(s)
on_path, after = [], []
for line in open(out):
    if "fsync(" not in line and "fdatasync(" not in line:
        continue
    if "resumed>" in line:
        continue
    t = ts(line)
    if t0 <= t <= t1:
        on_path.append(line.strip())
    elif t1 < t:
        after.append(line.strip())
print(f"request {1000*(t1-t0):.2f} ms; flush calls started during it: {len(on_path)}; in the 1 s after: {len(after)}")
for l in on_path:
    print("  ", l)
import shutil; shutil.rmtree(d, ignore_errors=True)
