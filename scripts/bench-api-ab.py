#!/usr/bin/env python3
"""A/B of `/v1` branch creation and restore (request to `finished`) on two `cambium up` binaries run side by side,
requests interleaved (A, B, B, A, ...) so that both see the same load on a busy machine. A small database only;
a branch from the latest state; a restore with `preserve: false` to a mark taken before one INSERT (as
`benches/benches/api.rs` does). Needs python3 and psql.

    scripts/bench-api-ab.py 60 path/to/cambium-before path/to/cambium-after
"""
import http.client, json, os, shutil, signal, subprocess, sys, tempfile, time

N = int(sys.argv[1])
BINS = {"before": sys.argv[2], "after": sys.argv[3]}


class Up:
    def __init__(self, name, binary, port):
        self.dir = tempfile.mkdtemp(prefix=f"api-ab-{name}-")
        self.proc = subprocess.Popen(
            [binary, "up", "--data-dir", self.dir, "--listen", f"127.0.0.1:{port}", "--pg-listen",
             f"127.0.0.1:{port + 1}", "--rate-limit", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.proc.stdout.readline()
        self.key = open(f"{self.dir}/api_key").read().strip()
        self.conn = http.client.HTTPConnection("127.0.0.1", port)

    def call(self, method, path, body=None):
        headers = {"Authorization": f"Bearer {self.key}"}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["content-type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        r = self.conn.getresponse()
        text = r.read()
        assert r.status in (200, 201, 202, 204), (r.status, text)
        return json.loads(text) if text else None

    def setup(self):
        p = self.call("POST", "/v1/projects", {"name": "p"})["project"]["id"]
        d = self.call("POST", f"/v1/projects/{p}/databases", {"name": "d"})
        self.call("GET", f"/v1/operations/{d['operation']['id']}?wait=30s")
        self.db = d["database"]
        subprocess.run(["psql", self.db["connection_uri"], "-qc", "CREATE TABLE marks (id INTEGER PRIMARY KEY)"],
                       check=True, capture_output=True)

    def branch(self, name):
        t = time.perf_counter()
        r = self.call("POST", f"/v1/databases/{self.db['id']}/branches", {"name": name})
        return time.perf_counter() - t, r["branch"]["id"]

    def restore(self, i):
        mark = self.call("POST", f"/v1/databases/{self.db['id']}/branches", {"name": f"mark{i}"})["branch"]
        self.call("DELETE", f"/v1/branches/{mark['id']}")
        subprocess.run(["psql", self.db["connection_uri"], "-qc", "INSERT INTO marks (id) VALUES (NULL)"],
                       check=True, capture_output=True)
        t = time.perf_counter()
        r = self.call("POST", f"/v1/branches/{self.db['default_branch_id']}/restore",
                      {"target_lsn": mark["parent_lsn"], "preserve": False})
        op = self.call("GET", f"/v1/operations/{r['operation']['id']}?wait=30s")["operation"]
        assert op["status"] == "finished", op
        return time.perf_counter() - t

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1e3


BASEPORT = 20000 + (os.getpid() % 400) * 20
ups = {name: Up(name, b, BASEPORT + 10 * k) for k, (name, b) in enumerate(BINS.items())}
for up in ups.values():
    up.setup()
print("load at start:", open("/proc/loadavg").read().strip(), time.strftime("%H:%M:%S", time.gmtime()))
creates = {n: [] for n in ups}
restores = {n: [] for n in ups}
created = {n: [] for n in ups}
order = list(ups)
for i in range(N + 5):
    for n in (order if i % 2 == 0 else order[::-1]):
        took, bid = ups[n].branch(f"b{i}")
        created[n].append(bid)
        if i >= 5:
            creates[n].append(took)
for i in range(N // 2 + 3):
    for n in (order if i % 2 == 0 else order[::-1]):
        took = ups[n].restore(i)
        if i >= 3:
            restores[n].append(took)
print("load at end:", open("/proc/loadavg").read().strip(), time.strftime("%H:%M:%S", time.gmtime()))
print("| binary | branch create p50 | p99 | restore to finished p50 | p99 | samples |")
print("|---|---|---|---|---|---|")
for n in ups:
    print(f"| {n} | {pct(creates[n], 50):.2f} ms | {pct(creates[n], 99):.2f} ms | {pct(restores[n], 50):.2f} ms | "
          f"{pct(restores[n], 99):.2f} ms | {len(creates[n])} / {len(restores[n])} |")
for up in ups.values():
    up.stop()
