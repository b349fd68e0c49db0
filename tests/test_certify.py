"""Certification: the confidence sequence on hand-computed cases, the decision rule, and `quarl-bench certify` on a
zoo agent (decided fast where the answer is obvious, stored, reused, resumed, refused on bad input)."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from quarl_bench.statistics.certification import minimum_safe, tolerance_delta, verdict
from quarl_bench.statistics.confidence_sequence import Interval, asymptotic_cs, mixture_rho_squared
from quarl_bench.store import ResultStore
from quarl_bench.store.results import load_results


def test_asymptotic_cs_matches_the_closed_form_worked_by_hand() -> None:
    # two-sided 0.05 (one-sided 0.025 each side), t* 100: rho^2 = (5.9915 + log 6.9915) / 100 = 0.079362
    assert mixture_rho_squared(0.05, 100) == pytest.approx(0.079362, abs=1e-6)
    # [1, -1, 1, -1]: mean 0, sd 1, t = 4: t rho^2 + 1 = 1.31745; 1 * sqrt(2 * 1.31745 / (16 rho^2)
    # * log(sqrt(1.31745) / 0.05)) = sqrt(2.07507 * 3.13362) = 2.5500
    interval = asymptotic_cs([1, -1, 1, -1], 0.025, 100)
    assert (interval.pairs, interval.mean) == (4, 0.0)
    assert interval.upper == pytest.approx(2.5500, abs=1e-4) and interval.lower == pytest.approx(-2.5500, abs=1e-4)
    # scale-free: rewards x 1000, interval x 1000; 20 equal pairs: sd 0, radius 0 (hence the minimum pairs)
    assert asymptotic_cs([1000, -1000, 1000, -1000], 0.025, 100).upper == pytest.approx(2550.0, abs=0.1)
    assert asymptotic_cs([3.0] * 20, 0.025, 100).lower == pytest.approx(3.0)


def test_the_sequence_widens_with_confidence_and_shrinks_with_pairs() -> None:
    values = [1.0, -1.0] * 50
    assert asymptotic_cs(values, 0.01).upper > asymptotic_cs(values, 0.05).upper
    assert asymptotic_cs(values * 4, 0.05).upper < asymptotic_cs(values, 0.05).upper
    # unlike a fixed-n interval it is wider than 1.96 standard errors: the price of looking after every batch
    assert asymptotic_cs(values, 0.05).upper > 1.96 / math.sqrt(100)


def test_verdicts_and_the_certified_minimum() -> None:
    assert verdict(Interval(20, -1.0, -2.0, 0.0), delta=3.0) == "safe"  # lower -2 > -3
    assert verdict(Interval(20, -9.0, -10.0, -8.0), delta=3.0) == "unsafe"  # upper -8 < -3
    assert verdict(Interval(20, -3.0, -4.0, -2.0), delta=3.0) is None  # straddles -3: sample more
    steps = [("int8", "safe"), ("int6", "safe"), ("int4", "undetermined"), ("int2", "safe")]
    assert minimum_safe(steps) == "int6"  # int2 is safe, but int4 above it is not certified
    assert minimum_safe([("int8", "unsafe")]) is None
    # 5% of (R_fp32 - R_random): Acrobot -86.8 against random -500 gives 20.66, not 5% of |-86.8| = 4.3
    assert tolerance_delta(5, -86.8, -500.0) == pytest.approx(20.66)
    with pytest.raises(ValueError, match="does not beat a random one"):
        tolerance_delta(5, -500.0, -500.0)


AGENT = ("--algo", "dqn", "--env", "CartPole-v1", "--no-hub")


@pytest.fixture(scope="module")
def certified(zoo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dqn CartPole certified at fp16 and int2 (every width) in one store."""
    from quarl_bench.cli import main

    store = tmp_path_factory.mktemp("certify") / "quarl.sqlite"
    args = [*AGENT, "--folder", str(zoo), "--bits", "fp16", "2", "--every-width", "--store", str(store)]
    assert main(["certify", *args]) == 0
    return store


def verdicts(store: Path) -> dict[str, dict]:
    with sqlite3.connect(store) as db:
        db.row_factory = sqlite3.Row
        return {row["spec"]: dict(row) for row in db.execute("SELECT * FROM verdicts")}


def test_identical_play_is_safe_within_1_5x_its_floor_and_int2_unsafe_within_40(certified: Path) -> None:
    found = verdicts(certified)
    # fp16 plays dqn CartPole's episodes exactly: 61 loss-free pairs are the floor of any valid test (returns in
    # [0, 500], δ ≈ 24); with δ estimated (R_random on 300 episodes) it decides at 80, the first batch end after
    # the floor that δ's own bound allows (100 with R_random on 100 episodes)
    assert found["fp16"]["verdict"] == "safe" and 61 <= found["fp16"]["episodes"] <= 80
    assert found["int2"]["verdict"] == "unsafe" and found["int2"]["episodes"] <= 40
    evidence = json.loads(found["fp16"]["evidence"])
    assert evidence["guarantee"] == "finite-sample" and evidence["bounds"] == [0, 500]
    assert evidence["catastrophes"] == 0 and evidence["catastrophe_rate_upper"] < 0.05
    assert evidence["delta_low"] < found["fp16"]["delta"]  # judged against δ's lower bound
    assert found["int2"]["upper"] < -found["int2"]["delta"]
    # delta is 5% of fp32 (500 on CartPole) minus a random policy (~22), both measured on a scale set of their own
    assert 20 < found["fp16"]["delta"] < 25
    rows = load_results(certified).set_index("key")
    behind = json.loads(found["int2"]["rows"])
    assert set(rows.loc[behind, "precision"]) == {"int2", "fp32"}
    assert "random" in set(rows["method"])


def test_paired_batches_share_their_episodes(certified: Path) -> None:
    rows = load_results(certified)
    batch = rows[rows["seed"] == 0].set_index("precision")
    fp32, fp16 = batch.loc["fp32"], batch.loc["fp16"]
    assert sorted(map(tuple, fp32["episode_ids"])) == sorted(map(tuple, fp16["episode_ids"]))
    assert len({tuple(e) for e in fp32["episode_ids"]}) == 20  # each episode its own (env, number, reset seed)


def test_json_answer_is_reused_from_the_store(cli, certified: Path, zoo: Path) -> None:
    before = len(load_results(certified))
    code, out, err = cli("certify", *AGENT, "--folder", zoo, "--bits", "2", "fp16", "--store", certified, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["minimum_safe"] == "fp16"
    assert [(v["precision"], v["verdict"]) for v in answer["verdicts"]] == [("fp16", "safe"), ("int2", "unsafe")]
    assert len(load_results(certified)) == before  # stored verdicts: nothing evaluated again


def test_an_interrupted_certification_continues_from_its_stored_batches(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    common = ("certify", *AGENT, "--folder", zoo, "--bits", "int6", "--store", store, "--tolerance-abs", "1000")
    code, _, err = cli(*common, "--max-episodes", "20", "--batch", "10")
    assert code == 0, err
    assert "[1/1] questions: " in err and " elapsed" in err  # progress, one line per answer when redirected
    first = load_results(store).set_index("key")["created_at"]
    code, out, err = cli(*common, "--max-episodes", "40", "--batch", "10", "--json")
    assert code == 0, err
    assert "questions:" not in err  # --json prints the answer only
    again = load_results(store).set_index("key")["created_at"]
    assert (again.loc[first.index] == first).all()  # the batches already stored were not played again
    assert json.loads(out)["verdicts"][0]["verdict"] == "safe"  # |difference| <= 500 < 1000


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--tolerance", "0"), "bad tolerance '0'"),
        (("--tolerance", "-5"), "bad tolerance '-5'"),
        (("--confidence", "1.2"), "bad confidence '1.2'"),
        (("--confidence", "0.5"), "bad confidence '0.5'"),
        (("--max-episodes", "10"), "bad max episodes 10: expected at least one batch (20 episodes)"),
        (("--bits", "int1"), "bad precision 'int1'"),
        (("--tolerance-abs", "0"), "bad absolute tolerance '0'"),
        (("--return-bounds", "500", "0"), "bad return bounds 500 0: expected two finite numbers LO < HI"),
        (("--return-bounds", "0", "0"), "bad return bounds 0 0"),
        (("--return-bounds", "low", "500"), "bad return bound 'low': expected a finite number"),
        (("--max-catastrophe-rate", "1"), "bad max catastrophe rate '1': expected a share in (0, 1)"),
        (("--max-catastrophe-rate", "0"), "bad max catastrophe rate '0'"),
        (("--catastrophe", "0"), "bad catastrophe '0': expected a return loss R > 0"),
        (("--catastrophe", "-3"), "bad catastrophe '-3'"),
    ],
)
def test_bad_certify_input_is_one_line_and_stores_nothing(cli, tmp_path: Path, flags, message) -> None:
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli("certify", "--algo", "dqn", "--env", "CartPole-v1", "--no-hub", *flags, "--store", store)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not store.exists()


def test_certify_agent_from_python_takes_a_policy_file(zoo: Path, tmp_path: Path) -> None:
    from quarl_bench import CertifyConfig, certify_agent

    model = zoo / "dqn" / "CartPole-v1_1" / "CartPole-v1.zip"
    result = certify_agent(
        model, ("fp16",), CertifyConfig(tolerance_abs=25.0), tmp_path / "q.sqlite", env="CartPole-v1"
    )
    answer = result.as_json()
    assert result.minimum_safe == "fp16" and 61 <= answer["verdicts"][0]["episodes"] <= 100
    assert answer["guarantee"] == "finite-sample"  # CartPole-v1's returns lie in [0, 500]


def test_each_family_is_walked_and_answered_apart() -> None:
    from quarl_bench.certify.plan import widest_first
    from quarl_bench.statistics.certification import family
    from quarl_bench.types import QuantSpec

    specs = [QuantSpec(p) for p in ("int4", "nvfp4", "fp16", "int8", "mxfp4", "mxfp8")] + [
        QuantSpec("int4", group_size=32),
        QuantSpec("int8", group_size=32),
    ]
    assert [family(s) for s in specs[:3]] == ["int", "nvfp4", "int"]
    assert family(specs[4]) == family(specs[5]) == "MX" and family(specs[6]) == "int g32"
    walked = [(family(s), s.precision) for s in widest_first(tuple(specs))]
    # families in the order of their widest spec, each widest first
    assert walked == [
        ("int", "fp16"),
        ("int", "int8"),
        ("int", "int4"),
        ("int g32", "int8"),
        ("int g32", "int4"),
        ("MX", "mxfp8"),
        ("MX", "mxfp4"),
        ("nvfp4", "nvfp4"),
    ]


def test_a_grid_is_certified_agent_by_agent_and_the_report_opens_with_the_verdicts(
    cli, zoo: Path, tmp_path: Path
) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        "name: tiny\nepisodes: 20\ngrid:\n  - {algos: [dqn], envs: [CartPole-v1], precisions: [8, 2]}\n"
        "  - {algos: [dqn], envs: [CartPole-v1], precisions: [8, 6], group_size: 32}\n"
    )
    store = tmp_path / "quarl.sqlite"
    code, out, err = cli("certify", "--grid", grid, "--folder", zoo, "--no-hub", "--store", store, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["minimum_safe"] == "int8" and answer["families"] == {"int": "int8", "int g32": "int6 g32"}
    code, _, err = cli("report", "--store", store, "--out", tmp_path / "report", "--html")
    assert code == 0, err
    import pandas as pd

    grid_table = pd.read_csv(tmp_path / "report" / "certified_verdicts.csv").set_index("family")
    assert grid_table.loc["int", "certified minimum"] == "int8" and grid_table.loc["int", "int2"] == "unsafe (20)"
    assert grid_table.loc["int g32", "certified minimum"] == "≤ int6"  # int6 is the narrowest g32 width tried
    assert grid_table.loc["int", "guarantee"] == "finite-sample"  # CartPole's returns lie in [0, 500]
    assert grid_table.loc["int", "catastrophes at the minimum"].startswith("≤ ")
    # δ as a number up front, its rule after the precisions: the grid fits a laptop's window
    columns = list(grid_table.columns)
    assert 20 < float(grid_table.loc["int", "δ"]) < 25 and columns.index("int2") < columns.index("tolerance")
    page = (tmp_path / "report" / "report.html").read_text()
    assert page.index("Certified verdicts") < page.index("Reward and E% per variant")
    methods = pd.read_csv(tmp_path / "report" / "methods_safe_width.csv").iloc[0]
    assert (methods["RTN"], methods["RTN group 32"]) == (8, "≤ 6")  # the certified widths, not fixed-episode means


def test_rows_without_episode_identity_are_named_and_never_paired(
    cli, certified: Path, zoo: Path, tmp_path: Path
) -> None:
    import shutil

    store = tmp_path / "old.sqlite"
    shutil.copy(certified, store)
    with sqlite3.connect(store) as db:  # a row as stored before episode identities: another key, no identities
        columns = [row[1] for row in db.execute("PRAGMA table_info(results)")]
        values = ", ".join("'old-key'" if c == "key" else "'[]'" if c == "episode_ids" else c for c in columns)
        db.execute(f"INSERT INTO results ({', '.join(columns)}) SELECT {values} FROM results LIMIT 1")
    code, out, err = cli("certify", *AGENT, "--folder", zoo, "--bits", "fp16", "--store", store, "--json")
    assert code == 0, err
    assert "1 stored rows of this agent carry no episode identity" in err and len(err.strip().splitlines()) == 1
    assert json.loads(out)["verdicts"][0]["verdict"] == "safe"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--return-bounds", "0", "100"), "returned 500, outside the return bounds [0, 100] (declared"),
        (("--env", "LunarLander-v3", "--guarantee", "finite-sample"), "no known return bounds for LunarLander-v3"),
    ],
)
def test_a_guarantee_that_cannot_hold_stops_in_one_line_with_no_verdict(
    cli, zoo: Path, tmp_path: Path, flags, message
) -> None:
    store = tmp_path / "quarl.sqlite"
    code, _, err = cli("certify", *AGENT, "--folder", zoo, "--bits", "int8", *flags, "--store", store)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not store.exists() or not len(ResultStore(store).verdicts()) and not len(load_results(store))


def test_without_bounds_the_asymptotic_guarantee_is_labelled(cli, zoo: Path, tmp_path: Path) -> None:
    store = tmp_path / "quarl.sqlite"
    args = ("certify", *AGENT, "--folder", zoo, "--bits", "fp16", "--store", store, "--guarantee", "asymptotic")
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["guarantee"] == "asymptotic" and answer["verdicts"][0]["episodes"] == 100  # its minimum pairs
    code, out, err = cli(*args)
    assert code == 0 and "asymptotic (no return bounds; no decision before 100 pairs)" in " ".join(out.split())


def test_a_grid_declares_return_bounds_per_env(tmp_path: Path) -> None:
    from quarl_bench.errors import QuarlError
    from quarl_bench.jobs.grids import grid_return_bounds

    grid = tmp_path / "grid.yaml"
    grid.write_text("name: g\nreturn_bounds: {PointReach-v0: [-200, 0], CartPole: [0, 500]}\ngrid: []\n")
    assert grid_return_bounds(grid) == {"PointReach-v0": (-200.0, 0.0), "CartPole-v1": (0.0, 500.0)}
    grid.write_text("name: g\nreturn_bounds: {PointReach-v0: [0, -200]}\ngrid: []\n")
    with pytest.raises(QuarlError, match="bad return bounds 0 -200: expected two finite numbers LO < HI"):
        grid_return_bounds(grid)
