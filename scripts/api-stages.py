#!/usr/bin/env python3
"""Where one `/v1` branch creation and one restore (request to `finished`) spend their time, stage by stage, on a
fresh `cambium up` of the given binary: N creations (a branch from the latest state) and N/2 restores
(`preserve: false`, to a mark taken before one INSERT, as `benches/benches/api.rs` does), then the per-stage means
from `/metrics` (`cambium_api_stage_seconds_sum` / `_count`, see `api/src/stages.rs`) and the client's p50.
Needs python3 and psql.

    scripts/api-stages.py 30 path/to/cambium
"""
import http.client, json, os, re, shutil, signal, subprocess, sys, tempfile, time

N = int(sys.argv[1])
BINARY = sys.argv[2]
PORT = 21000 + (os.getpid() % 400) * 10

data_dir = tempfile.mkdtemp(prefix="api-stages-")
proc = subprocess.Popen(
    [BINARY, "up", "--data-dir", data_dir, "--listen", f"127.0.0.1:{PORT}", "--pg-listen", f"127.0.0.1:{PORT + 1}",
     "--rate-limit", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
proc.stdout.readline()
key = open(f"{data_dir}/api_key").read().strip()
conn = http.client.HTTPConnection("127.0.0.1", PORT)


def call(method, path, body=None, raw=False):
    headers = {"Authorization": f"Bearer {key}"}
    data = None
    if body is not None:
        data = json.dumps(body)
        headers["content-type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    text = r.read()
    assert r.status in (200, 201, 202, 204), (r.status, text)
    if raw:
        return text.decode()
    return json.loads(text) if text else None


def psql(sql):
    subprocess.run(["psql", db["connection_uri"], "-qc", sql], check=True, capture_output=True)


def stages():
    text = call("GET", "/metrics", raw=True)
    out = {}
    for kind, labels, value in re.findall(r'^cambium_api_stage_seconds_(sum|count)\{(.*)\} (\S+)$', text, re.M):
        call_name = re.search(r'call="([^"]*)"', labels).group(1)
        stage = re.search(r'stage="([^"]*)"', labels).group(1)
        out.setdefault((call_name, stage), {})[kind] = float(value)
    return out


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] * 1e3


try:
    p = call("POST", "/v1/projects", {"name": "p"})["project"]["id"]
    d = call("POST", f"/v1/projects/{p}/databases", {"name": "d"})
    call("GET", f"/v1/operations/{d['operation']['id']}?wait=30s")
    db = d["database"]
    psql("CREATE TABLE marks (id INTEGER PRIMARY KEY)")
    for i in range(5):  # warm-up, not counted below
        call("POST", f"/v1/databases/{db['id']}/branches", {"name": f"w{i}"})
    before = stages()
    print("load at start:", open("/proc/loadavg").read().strip(), time.strftime("%H:%M:%S", time.gmtime()))
    creates = []
    for i in range(N):
        t = time.perf_counter()
        call("POST", f"/v1/databases/{db['id']}/branches", {"name": f"b{i}"})
        creates.append(time.perf_counter() - t)
    middle = stages()
    restores = []
    for i in range(N // 2):
        mark = call("POST", f"/v1/databases/{db['id']}/branches", {"name": f"mark{i}"})["branch"]
        call("DELETE", f"/v1/branches/{mark['id']}")
        psql("INSERT INTO marks (id) VALUES (NULL)")
        t = time.perf_counter()
        r = call("POST", f"/v1/branches/{db['default_branch_id']}/restore",
                 {"target_lsn": mark["parent_lsn"], "preserve": False})
        op = call("GET", f"/v1/operations/{r['operation']['id']}?wait=30s")["operation"]
        restores.append(time.perf_counter() - t)
        assert op["status"] == "finished", op
    print("load at end:", open("/proc/loadavg").read().strip(), time.strftime("%H:%M:%S", time.gmtime()))
    after = stages()
    print(f"client: create p50 {pct(creates, 50):.2f} ms p90 {pct(creates, 90):.2f} ms min {min(creates) * 1e3:.2f} ms; "
          f"restore to finished p50 {pct(restores, 50):.2f} ms p90 {pct(restores, 90):.2f} ms min {min(restores) * 1e3:.2f} ms")
    # Creations from the first two snapshots; restores (and their long-polls) from the last two (the restores'
    # marks are branch creations too, right after a restore: not counted with the creations).
    wanted = (("POST /v1/databases/{id}/branches", before, middle), ("POST /v1/branches/{id}/restore", middle, after),
              ("operation restore_branch", middle, after), ("GET /v1/operations/{id}", middle, after))
    for name, start, end in wanted:
        rows = []
        for (c, stage), v in end.items():
            if c != name:
                continue
            b = start.get((c, stage), {})
            count = v.get("count", 0) - b.get("count", 0)
            total = v.get("sum", 0) - b.get("sum", 0)
            if count > 0:
                rows.append((stage, count, total / count * 1e6))
        if not rows:
            continue
        print(f"\n{name}\n| stage | calls | mean µs |\n|---|---|---|")
        for stage, count, mean in rows:
            print(f"| {stage} | {count:.0f} | {mean:.0f} |")
finally:
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    shutil.rmtree(data_dir, ignore_errors=True)
