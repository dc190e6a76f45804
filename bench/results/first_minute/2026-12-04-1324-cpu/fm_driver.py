import json, os, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import first_minute as fm
name = sys.argv[1]; reps = int(sys.argv[2]); tag = sys.argv[3]
rows = []
for i in range(reps):
    load = os.getloadavg()[0]
    r = fm.spawn("notebook", name, "--no-sweep", timeout=600)
    r["load1_before"] = load
    rows.append(r)
    print(tag, i, json.dumps({k: r.get(k) for k in ("first_result_s","first_status","first_reason","first_phases_ms","inside_cell_s","load1_before","error")}), flush=True)
json.dump(rows, open(f"/tmp/hfirst/{tag}.json", "w"), indent=1, default=str)
