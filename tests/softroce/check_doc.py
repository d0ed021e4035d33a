"""The JSON checks of verbs-suite.sh, served to it by one long-lived python.

Under TCG a python start-up inside the VM (its interpreter and modules read over virtio-9p)
costs 1-2.5 s; the suite checks about 60 documents per shape. verbs-suite.sh starts this
once as a coprocess (`--serve`) and sends one request a line, tab-separated:

    FILE <TAB> TEST <TAB> EXPR

and reads one line back: `ok`, or `fail ` and the reason (the failed assertion). A check
never ends the server; a request it cannot read is answered `fail`.

`python3 check_doc.py FILE TEST EXPR` checks one document the same way, for a run by hand.

The check: every result of the client's document is TEST over verbs, complete, with both
sides' counters (rxe: sent_pkts rose on the initiator), and the python expression EXPR
holds over each result `r` (and the document `d`).
"""

import json
import sys


def one_connection(d):
    """The pair connected at its first size and re-armed that connection for the others."""
    s = [r["setup"]["connected"] for r in d["results"]]
    return s[0] and not any(s[1:])


def driver_moved(r):
    """The driver's own counters (ethtool -S of each side's netdev) saw the payload: sent
    from the initiator's queues, received on the responder's."""
    c = r["counters"]
    payload = r["iterations"] * r["size_bytes"]

    def total(side, prefix):
        dc = c[side].get("driver_counters") or {}
        assert dc, "%s: no driver counters (%s)" % (side, c[side].get("driver_counters_unknown"))
        return sum(v for k, v in dc.items() if k.startswith(prefix) and k.endswith("_bytes"))

    tx, rx = total("initiator", "tx_queue_"), total("responder", "rx_queue_")
    assert tx >= payload and rx >= payload, "driver bytes tx %d rx %d, payload %d" % (tx, rx, payload)
    return True


def perftest_peak(r, alone=True):
    """perftest's BW peak was measured; one-way, the whole run is one of its windows, so it
    is never below the average (up to rounding). Bidirectional (alone False): it is the sum
    of the two sides' own peaks (perftest -b), each in its direction and never below that
    direction's average."""
    bw = r["bw_gbit_s"]
    p = bw.get("perftest_peak")
    assert p is not None and p > 0, "no perftest_peak in %s" % bw
    if alone:
        assert p >= bw["avg"] * 0.999, "perftest_peak %s below avg %s" % (p, bw["avg"])
        return True
    dirs = [x["bw_gbit_s"] for x in r.get("directions", [])]
    assert len(dirs) == 2, "want two directions, got %s" % dirs
    for x in dirs:
        assert x.get("perftest_peak") is not None, "a direction without its peak: %s" % x
        assert x["perftest_peak"] >= x["avg"] * 0.999, "direction peak below its avg: %s" % x
    total = sum(x["perftest_peak"] for x in dirs)
    assert abs(p - total) <= 1e-9 * total, "perftest_peak %s, the sides' sum %s" % (p, total)
    return True


def driver_unknown(r):
    """No driver counters, and each side says why (ethtool's own words)."""
    for side in ("initiator", "responder"):
        s = r["counters"][side]
        assert not s.get("driver_counters"), "%s has driver counters" % side
        why = s.get("driver_counters_unknown") or ""
        assert "ethtool" in why, "%s: no reason given (%r)" % (side, why)
    return True


HELPERS = {
    "one_connection": one_connection,
    "driver_moved": driver_moved,
    "driver_unknown": driver_unknown,
    "perftest_peak": perftest_peak,
}


def check(path, test, expr):
    """Raises AssertionError (or the error reading the document) when the check fails."""
    with open(path) as f:
        d = json.load(f)
    assert d["schema_version"] == 1, "schema_version"
    assert d["complete"], "document marked incomplete: %s" % d.get("incomplete_reason")
    assert d["results"], "no results"
    assert d["options"].get("transport") == "verbs", "options.transport"
    for r in d["results"]:
        assert r["test"] == test, "test is %s, want %s" % (r["test"], test)
        assert r["transport"] == "verbs", "transport %s" % r["transport"]
        assert r["complete"], "result incomplete"
        assert r["iterations"] > 0, "no iterations"
        c = r.get("counters")
        assert c, "no counters in the result"
        for side in ("initiator", "responder"):
            s = c.get(side)
            assert s, "no %s counters" % side
            assert s["device"], "no device name"
            assert s["hw_counters"] or s["counters"], "%s counters empty" % side
        assert eval(expr, {}, dict(HELPERS, r=r, d=d)), "failed: " + expr
    # rxe counts packets in hw_counters (real NICs name them differently): over the run the
    # initiator must have sent some.
    sent = [r["counters"]["initiator"]["hw_counters"].get("sent_pkts") for r in d["results"]]
    if all(s is not None for s in sent):
        assert sum(sent) > 0, "sent_pkts did not rise"


def reason(e):
    """The failure in one line: the assertion's text, else the error's kind and text."""
    text = str(e) if isinstance(e, AssertionError) and str(e) else "%s: %s" % (type(e).__name__, e)
    return " ".join(text.split())


def serve():
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        try:
            if len(fields) != 3:
                raise ValueError("want FILE<TAB>TEST<TAB>EXPR, got %d field(s)" % len(fields))
            check(*fields)
            answer = "ok"
        except Exception as e:  # every failure is the check's answer, never the server's end
            answer = "fail " + reason(e)
        print(answer, flush=True)


def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
        return 0
    if len(sys.argv) != 4:
        print("usage: check_doc.py --serve | FILE TEST EXPR", file=sys.stderr)
        return 2
    try:
        check(*sys.argv[1:4])
    except Exception as e:
        print(reason(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
