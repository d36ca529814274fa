"""Table of bench/scaling/progress_ab.sh: lines '<one|on|off> <bench_scaling JSON>' on stdin,
the first the 1-rank run; efficiency is the 1-rank step over (ranks x step)."""
import json
import sys

rows = []
for line in sys.stdin:
    thread, record = line.split(" ", 1)
    rows.append((thread, json.loads(record)))
one = rows[0][1]["step_s"]
print(f"{'run':<26}{'step s':>9}{'compute s':>11}{'halo s':>9}{'allreduce s':>13}{'efficiency':>12}")
for thread, r in rows:
    name = "1 rank" if thread == "one" else f"{r['grid']}, thread {thread}"
    efficiency = one / (r["ranks"] * r["step_s"])
    print(f"{name:<26}{r['step_s']:>9.3f}{r['compute_s']:>11.3f}{r['halo_s']:>9.4f}{r['allreduce_s']:>13.4f}"
          f"{efficiency:>12.0%}")
