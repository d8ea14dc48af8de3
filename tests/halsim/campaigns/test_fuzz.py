"""``halsim fuzz``: findings are written as schedule files that replay to the same findings."""

import json
import os

from halsim.campaigns.fuzz import run_fuzz
from halsim.checks.cli import main_check
from halsim.cli import main


def test_fuzz_findings_replay_to_the_same_findings(tmp_path, capsys):
    out = tmp_path / "findings"
    code = main(["fuzz", "--programs", "12", "--seed", "100", "--size", "10", "--drop-sync", "0.3", "--out", str(out),
                 "-q"])
    text = capsys.readouterr().out
    assert code == 1
    assert text.splitlines()[0] == "fuzz: 12 programs on sim (seeds 100..111), 11 with findings"
    files = sorted(os.listdir(out))
    assert len(files) == 11 and files[0] == "fuzz_000100.toml"
    for name in files:
        path = str(out / name)
        assert main_check([path, "--json"]) == 1
        replay = json.loads(capsys.readouterr().out)
        rules = sorted({f["rule"] for f in replay["findings"]})
        with open(path, "rb") as f:
            import tomllib
            doc = tomllib.load(f)
        assert rules == doc["expect"], name
        # the same findings, message for message, as the campaign saw
        again = run_fuzz(1, int(name[5:11]), {"size": 10, "drop_sync": 0.3, "queues": 2, "fail_prob": 0.0,
                                               "device": "sim", "options": {}, "wait_before_signal": True},
                         None, progress=False)
        assert again["with_findings"] == 1
        assert sum(again["rules"].values()) == len(replay["findings"])


def test_clean_campaign_exits_0(capsys):
    assert main(["fuzz", "--programs", "5", "--drop-sync", "0", "--size", "8", "-q"]) == 0
    assert capsys.readouterr().out.splitlines() == ["fuzz: 5 programs on sim (seeds 0..4), 0 with findings"]


def test_fuzz_on_cuda_with_faults_and_a_local_pool(tmp_path, capsys):
    code = main(["fuzz", "--programs", "6", "--device", "sim:cuda", "--fault-rate", "0.2", "--drop-sync", "0",
                 "--jobs", "2", "-q"])
    assert code == 0, capsys.readouterr().out


def test_bad_arguments(capsys):
    assert main(["fuzz", "--programs", "0"]) == 2
    assert main(["fuzz", "--programs", "3", "--device", "local-task"]) == 2
    assert main(["fuzz", "--programs", "3", "--drop-sync", "1.5"]) == 2
    assert main(["fuzz", "--programs", "3", "--device", "sim:nope"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == ["halsim: error: --programs 0: must be >= 1",
                       "halsim: error: --device 'local-task': fuzzing runs on sim devices (sim, sim:cuda, …)",
                       "halsim: error: --drop-sync 1.5: must be in [0, 1]"]
    assert err[3].startswith("halsim: error: --device 'sim:nope': NOT_FOUND") and len(err) == 4


def test_a_clean_campaign_on_devices_whose_queue_calls_block_is_clean(capsys):
    # sim:sync and legacy_sync Metal lack async_queue: a consumer submitted before its host gate
    # would block the host for ever, so their programs are generated producer-first
    for device in ("sim:metal?legacy_sync=1", "sim:sync"):
        assert main(["fuzz", "--programs", "6", "--device", device, "--drop-sync", "0", "--size", "10", "-q"]) == 0
        assert capsys.readouterr().out.splitlines() == [f"fuzz: 6 programs on {device} (seeds 0..5), 0 with findings"]
