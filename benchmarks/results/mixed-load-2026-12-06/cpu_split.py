"""CPU seconds per process group over a window: python cpu_split.py SECONDS"""
import os, sys, time, collections
HZ = os.sysconf("SC_CLK_TCK")
def snap():
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            st = open(f"/proc/{p}/stat").read()
            cmd = open(f"/proc/{p}/cmdline").read().replace("\0", " ")[:160]
        except OSError: continue
        f = st.rsplit(")", 1)[1].split()
        out[p] = (int(f[11]) + int(f[12]), cmd, st.split("(")[1].split(")")[0])
    return out
def group(cmd, comm):
    if "postgres" in comm or "postgres" in cmd: return "postgres"
    if "bound" in cmd: return "bench client + loopback LLM (bound.py)"
    if "multiprocessing" in cmd or "spawn_main" in cmd: return "uvicorn worker"
    if "livingrag" in cmd and "serve" in cmd: return "uvicorn supervisor"
    return "other:" + comm
a = snap(); t0 = time.time(); time.sleep(float(sys.argv[1])); b = snap(); dt = time.time() - t0
tot = collections.Counter()
for p, (ticks, cmd, comm) in b.items():
    tot[group(cmd, comm)] += (ticks - a.get(p, (0,))[0]) / HZ
for g, s in tot.most_common(12):
    print(f"{g:45s} {s:7.1f} cpu-s  {100*s/dt/os.cpu_count():5.1f}% of the machine")
print(f"window {dt:.1f} s, {os.cpu_count()} cpus, total {sum(tot.values()):.1f} cpu-s")
