import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l); s=d['stages_ms']
    print(d['cfg'],d['round'],d['at'],d['answered_rps'],'ask',d['ask']['p50_ms'],d['ask']['p95_ms'],'add',d['add']['p50_ms'],d['add']['p95_ms'],'runs',d['add_runs'],{k.split('.')[1]:v['p50'] for k,v in s.items()}, d['statuses'])
