import re, sys, collections
lines = open(sys.argv[1], errors="replace").read().split("\n")
sect = None; stmts = collections.defaultdict(list)
for l in lines:
    m = re.search(r"statement: SELECT 'MARK-(\w+)'", l)
    if m: sect = m.group(1); continue
    m = re.search(r"LOG:  (?:statement|execute [^:]*): (.*)", l)
    if m and sect: stmts[sect].append(m.group(1).strip())
for sect, n in (("asks", 20), ("adds", 5)):
    s = stmts[sect]
    print(f"== {sect}: {len(s)} statements, {len(s)/n:.1f} per request")
    c = collections.Counter(re.sub(r"\s+", " ", x)[:110] for x in s)
    for k, v in c.most_common(40): print(f"{v/n:6.1f}  {k}")
