"""Jepsen-style fault campaigns: nemeses (nemesis.py) strike a cluster whose Raft links run
through proxies (links.py) while clients write and read (the fault harness's workloads and
probes.py); the checker (checker.py) then judges everything recorded. `make chaos` runs a long
campaign (campaign.py); tests/faults/test_chaos.py runs a short one with a fixed seed."""
