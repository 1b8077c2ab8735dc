"""Start a livingrag serve (test helpers), run the 32-client mixed load while py-spy records it."""
import os
import json, subprocess, sys, time, os
sys.path.insert(0, os.environ.get("ROOT", "/work/main"))
from pathlib import Path
from tests.api_support import Server, server_env
from tests import conftest
from livingrag.testing.openai_server import OpenAICompatServer
from livingrag.api.load import run_load
import tests.test_api_load as tl

url = os.environ["DBURL"]
secs = float(os.environ.get("SECS", "20"))
tmp = Path("/tmp/prof/data"); tmp.mkdir(exist_ok=True)
with OpenAICompatServer() as llm:
    extra = dict(kv.split("=",1) for kv in os.environ.get("EXTRA","").split() if kv)
    env = server_env(url, llm.base_url, LIVINGRAG_DB__DATA_DIR=str(tmp), **extra)
    srv = Server(env, log_path=Path("/tmp/prof/server.log"), args=tuple(os.environ.get("SARGS","").split())).start()
    try:
        tid, key, cid = tl._setup(srv.url)
        spy = None
        if os.environ.get("SPY"):
            spy = subprocess.Popen(["/work/main/.venv/bin/py-spy", "record", "-p", str(srv.proc.pid), "-d", str(int(secs)), "-r", "50", "-f", "raw", "-o", "/tmp/prof/stacks.txt", "--threads"] + (["--gil"] if os.environ.get("GIL") else []), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rep = run_load(srv.url, key, cid, clients=32, seconds=secs, ask_body={"ablations": ["gate"]})
        summ = rep.summary()
        ok = sum(n for (k, st), n in rep.statuses.items() if 200 <= st < 300)
        bad = sum(n for (k, st), n in rep.statuses.items() if st >= 500 or st == 0)
        summ["answered_rps_calc"] = round(ok / rep.seconds, 2); summ["5xx"] = bad
        print(json.dumps(summ))
        if spy: spy.wait(60)
    finally:
        srv.stop()
