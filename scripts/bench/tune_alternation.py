"""The configurations that `bertqa tune` runs named, measured again side by side: each
loaded through Triton's repository API (the model's own configuration with the
candidate's max batch size, instance count and dynamic batching) and measured by
`bertqa perf` at the concurrency tune reported, in alternation, ROUNDS times each. Run
by scripts/bench/tune_search.sh (part 4); it can be run again on kept reports.

usage: python3 tune_alternation.py BERTQA URL HTTP_URL MODEL DATA ROUNDS REPORT.json...
Prints one JSON line: each report's best configuration, its rounds and their mean.
The model's own configuration is loaded back at the end.
"""
import json
import subprocess
import sys
import urllib.request

bq, url, http, model, data, rounds, *reports = sys.argv[1:]
rounds = int(rounds)


def get(path):
    return json.load(urllib.request.urlopen(http + path))


def post(path, body):
    req = urllib.request.Request(http + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=600).read()


original = get(f"/v2/models/{model}/config")


def apply(cfg):
    """Loads the model's configuration with a candidate's settings (an override)."""
    c = json.loads(json.dumps(original))
    c["max_batch_size"] = cfg["max_batch_size"]
    for g in c.get("instance_group", []):
        g["count"] = cfg["instance_count"]
    c.pop("dynamic_batching", None)
    d = cfg["dynamic_batching"]
    if d is not None:
        c["dynamic_batching"] = {"max_queue_delay_microseconds": d["max_queue_delay_microseconds"]}
        if d["preferred_batch_size"]:
            c["dynamic_batching"]["preferred_batch_size"] = d["preferred_batch_size"]
    post(f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(c)}})


def perf(concurrency):
    out = subprocess.run([bq, "perf", "--model", model, "--data", data, "--url", url,
                          "--concurrency", str(concurrency), "--batch-size", "1",
                          "--measurement-interval-ms", "3000", "--warmup", "16", "--no-metrics",
                          "--json", "--quiet"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["levels"][0]["throughput"]["features_per_s"]


named = []
for path in reports:
    best = json.load(open(path))["best"]
    named.append({"report": path, "config": best["config"], "concurrency": best["concurrency"],
                  "rounds": []})
try:
    for r in range(rounds):
        # A B C ..., then ... C B A: drift on a shared machine falls on all alike.
        order = named if r % 2 == 0 else named[::-1]
        for n in order:
            apply(n["config"])
            n["rounds"].append(round(perf(n["concurrency"]), 1))
finally:
    post(f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(original)}})
for n in named:
    n["mean"] = round(sum(n["rounds"]) / len(n["rounds"]), 1)
print(json.dumps(named))
