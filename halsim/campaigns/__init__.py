"""Campaigns: random programs, parameter sweeps and fuzzing, locally or on Dask (``docs/campaigns.md``).

* :mod:`.generate` — seeded random valid programs as schedule documents (and hypothesis strategies);
* :mod:`.sweep` — ``halsim sweep SPEC``: a grid or random sample of device options, cost-model fields
  and seeds, run on a process pool or Dask, results streamed to CSV;
* :mod:`.fuzz` — ``halsim fuzz``: generated programs + checks, findings written as replayable schedules.

>>> from halsim.campaigns.generate import generate
>>> generate(1, size=3)["device"]
{'uri': 'sim', 'options': {'queues': 2}}
"""
