#!/usr/bin/env python3
"""The fidelity method the side-by-side scripts share: paired rounds, intervals, A/A.

A fidelity claim ("ours times a collective as nccl-tests would, within 5 %") is about a
ratio a rerun must not contradict. Single medians do not hold: on a busy node the ratio of
two medians swings by more than the claim from run to run. So every script runs rounds
of reference, ours, reference again, back to back, and hands them here:

- each round gives one paired ratio, ours / mean(the reference runs of that round), so
  drift in the machine (a neighbour starting, a frequency change) hits both sides alike;
- the reference against itself, the same way (its second run / its first, each round),
  is the A/A ratio: what the method sees where there is no difference at all;
- the median of the per-round ratios gets a 95 % percentile-bootstrap interval over the
  rounds (resampled with replacement, a fixed seed so a rerun of the analysis prints the
  same figures); the A/A ratios get one too;
- the tolerance is the claim's (5 % unless told) or the A/A interval's reach from 1 where
  that is wider: a difference the reference shows against itself is no difference;
- the verdict: *within* when ours' whole interval lies inside 1 +- tolerance, *above* or
  *below* when it lies wholly beyond it, *undecided* otherwise: the interval straddles a
  bound, fewer than 5 rounds paired, or an A/A reach beyond twice the claim (a machine
  too noisy for the claim). A size is never called within on a guess.

Input (stdin or a file): lines `WHAT ROUND WHO VALUE`, WHO `ref` or `ours`, a round with
two reference runs (or more, in the order they ran: the A/A ratio is the last over the
first) and one of ours; `#` lines are skipped. WHAT is a name
without spaces (a size, a test). Output: one row per WHAT in first-seen order, and with
--json a document of the same figures. Exit 0 (a measurement never fails on its
figures); exit 2 on input it cannot read.

Usage: fidelity.py [--tolerance 0.05] [--level 0.95] [--resamples 4000] [--json OUT]
       [--title TEXT] [FILE]
"""

import argparse
import json
import math
import os
import random
import statistics
import sys


def bootstrap_median(values, level, resamples, seed=1):
    """(low, high) of the percentile-bootstrap interval of the median of `values`."""
    if not values:
        return (float("nan"), float("nan"))
    rng = random.Random(seed)
    n = len(values)
    meds = sorted(
        statistics.median(rng.choices(values, k=n)) for _ in range(resamples)
    )
    tail = (1 - level) / 2
    lo = meds[int(tail * (resamples - 1))]
    hi = meds[int(round((1 - tail) * (resamples - 1)))]
    return (lo, hi)


def verdict(lo, hi, tol):
    """within / above / below / undecided of an interval of ratios against 1 +- tol."""
    if lo != lo or hi != hi:
        return "undecided"
    if lo >= 1 - tol and hi <= 1 + tol:
        return "within"
    if lo > 1 + tol:
        return "above"
    if hi < 1 - tol:
        return "below"
    return "undecided"


def judge(rounds, tolerance=0.05, level=0.95, resamples=4000):
    """Figures of one WHAT: `rounds` maps a round to {"ref": [..], "ours": [..]}."""
    ratios, aa, refs, ours = [], [], [], []
    for r in sorted(rounds):
        ref, mine = rounds[r].get("ref", []), rounds[r].get("ours", [])
        refs += ref
        ours += mine
        if ref and mine and all(v > 0 for v in ref):
            ratios.append(statistics.median(mine) / statistics.fmean(ref))
        if len(ref) >= 2 and ref[0] > 0:
            aa.append(ref[-1] / ref[0])
    lo, hi = bootstrap_median(ratios, level, resamples)
    aa_lo, aa_hi = bootstrap_median(aa, level, resamples)
    reach = max(abs(aa_lo - 1), abs(aa_hi - 1)) if aa else float("nan")
    tol = max(tolerance, reach) if reach == reach else tolerance
    # Fewer than 5 paired rounds: the bootstrap's interval of a median is then only the
    # spread of a handful of values; an A/A reach beyond twice the claim: the machine is
    # too noisy for the claim, whatever ours did. Say so instead of judging.
    if len(ratios) < 5:
        word = "undecided (rounds)"
    elif tol > 2 * tolerance:
        word = "undecided (A/A noise)"
    else:
        word = verdict(lo, hi, tol)
    return {
        "rounds": len(ratios),
        "ref_median": statistics.median(refs) if refs else None,
        "ours_median": statistics.median(ours) if ours else None,
        "ratio": statistics.median(ratios) if ratios else None,
        "ratio_interval": [lo, hi],
        "aa_ratio": statistics.median(aa) if aa else None,
        "aa_interval": [aa_lo, aa_hi],
        "tolerance": tol,
        "verdict": word,
    }


def read(lines):
    """WHAT -> round -> WHO -> [values], WHATs in first-seen order."""
    table = {}
    for k, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4 or parts[2] not in ("ref", "ours"):
            raise ValueError(f"line {k}: want `WHAT ROUND ref|ours VALUE`, got {line!r}")
        what, rnd, who, value = parts
        try:
            table.setdefault(what, {}).setdefault(int(rnd), {}).setdefault(who, []).append(
                float(value)
            )
        except ValueError:
            raise ValueError(f"line {k}: round and value must be numbers, got {line!r}")
    return table


def clean(x):
    """NaN (no figure) as null: JSON has no NaN."""
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [clean(v) for v in x]
    return x


def fmt(x, digits=3):
    return "-" if x is None or x != x else f"{x:.{digits}f}"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("file", nargs="?")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--resamples", type=int, default=4000)
    p.add_argument("--json")
    p.add_argument("--title", default="")
    a = p.parse_args(argv)
    try:
        src = open(a.file) if a.file else sys.stdin
        table = read(src)
    except (OSError, ValueError) as e:
        print(f"fidelity: {e}", file=sys.stderr)
        return 2
    if not table:
        print("fidelity: no rounds in the input (lines `WHAT ROUND ref|ours VALUE`)", file=sys.stderr)
        return 2
    rows = {what: judge(r, a.tolerance, a.level, a.resamples) for what, r in table.items()}
    pct = round(a.level * 100)
    if a.title:
        print(f"# {a.title}")
    print(
        f"# ratio = median over rounds of ours / the round's reference; [{pct} % bootstrap interval];"
        f" A/A = the reference's 2nd run / its 1st"
    )
    print(
        f"# {'what':>12} {'ref':>10} {'ours':>10} {'ratio':>6} {'interval':>15}"
        f" {'A/A':>6} {'A/A interval':>15} {'tol':>5} {'n':>3}  verdict"
    )
    for what, f in rows.items():
        lo, hi = f["ratio_interval"]
        alo, ahi = f["aa_interval"]
        print(
            f"  {what:>12} {fmt(f['ref_median']):>10} {fmt(f['ours_median']):>10}"
            f" {fmt(f['ratio']):>6} {'[' + fmt(lo) + ', ' + fmt(hi) + ']':>15}"
            f" {fmt(f['aa_ratio']):>6} {'[' + fmt(alo) + ', ' + fmt(ahi) + ']':>15}"
            f" {fmt(f['tolerance'], 2):>5} {f['rounds']:>3}  {f['verdict']}"
        )
    counts = {}
    for f in rows.values():
        word = f["verdict"].split()[0]
        counts[word] = counts.get(word, 0) + 1
    print("# " + ", ".join(f"{v} {w}" for w, v in sorted(counts.items())))
    if a.json:
        with open(a.json + ".tmp", "w") as out:
            json.dump({"title": a.title, "level": a.level, "rows": clean(rows)}, out, indent=2)
        os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
