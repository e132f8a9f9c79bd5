"""Per loop window (marks.txt: epoch seconds of each loop's start and end), the median SM clock and
power of nvidia-smi's samples (smi.csv, every 100 ms) above 300 W (the loop running, not Python
starting), the highest temperature and the clock-event reasons seen. Usage: smi_windows.py DIR.
The device's nvidia-smi timestamps are UTC, as the marks."""
import csv,sys,datetime,statistics as st
d=sys.argv[1]
rows=[]
for r in list(csv.reader(open(d+'/smi.csv')))[1:]:
    try:
        t=datetime.datetime.strptime(r[0].strip(),'%Y/%m/%d %H:%M:%S.%f').replace(tzinfo=datetime.timezone.utc).timestamp()
        rows.append((t,float(r[1]),float(r[2]),float(r[3]),r[4].strip()))
    except Exception as e: pass
marks=[l.split(None,1) for l in open(d+'/marks.txt')]
starts={}
for t,name in marks:
    name=name.strip(); t=float(t)
    if name.endswith('start'): starts[name[:-6]]=t
    else:
        s=starts[name[:-4]]
        w=[x for x in rows if s<=x[0]<=t]
        busy=[x for x in w if x[2]>300]
        if not busy: print(name[:-4],'no busy samples',len(w)); continue
        print(f"{name[:-4]:60s} n={len(busy):3d} clock med {st.median([x[1] for x in busy]):6.0f} MHz power med {st.median([x[2] for x in busy]):5.0f} W temp max {max(x[3] for x in busy):.0f} reasons {sorted(set(x[4] for x in busy))}")
