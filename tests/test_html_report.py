"""``quarl-bench report --html`` in a real browser (headless Debian chromium through selenium): the page renders,
its tables hold the store's numbers, the variant selector switches tables, the console stays clean."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from quarl_bench.api import evaluate_agent
from quarl_bench.store import ResultStore

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def cartpole_policy() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))


@pytest.fixture(scope="module")
def two_variant_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fp32/int8/int3 rows of one torch policy on evaluation seeds 0 and 7: two variants."""
    path = tmp_path_factory.mktemp("html") / "store.sqlite"
    for seed in (0, 7):
        evaluate_agent(cartpole_policy(), "CartPole-v1", ("fp32", "int8", "int3"), episodes=4, seed=seed, store=path)
    return path


@pytest.fixture
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "needs chromium and chromedriver (scripts/bootstrap.sh installs them when it runs as root with apt)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def test_page_renders_the_stores_numbers_and_switches_variants(cli, two_variant_store: Path, tmp_path, browser):
    from selenium.webdriver.support.ui import Select

    out = tmp_path / "report"
    code, _, err = cli("report", "--store", two_variant_store, "--out", out, "--html")
    assert code == 0, err
    page = out / "report.html"
    assert "http" not in page.read_text().split("<body>")[1].split("</body>")[0].replace("http-equiv", "")
    browser.get(page.as_uri())
    assert browser.save_screenshot(str(tmp_path / "report.png")) and (tmp_path / "report.png").stat().st_size > 10_000
    with ResultStore(two_variant_store) as store:
        rows = store.to_dataframe()
    visible = lambda: [b for b in browser.find_elements("css selector", "[data-variant]") if b.is_displayed()]  # noqa: E731
    selector = Select(browser.find_element("id", "variant"))
    assert [o.text for o in selector.options] == ["episodes 4", "seed 7, episodes 4"]
    for option, seed in (("episodes 4", 0), ("seed 7, episodes 4", 7)):
        selector.select_by_visible_text(option)
        [table] = visible()
        text = table.text
        for _, row in rows[rows["seed"] == seed].iterrows():
            assert f"{row['mean_reward']:.2f}" in text and row["key"] in text
        for _, row in rows[rows["seed"] != seed].iterrows():
            assert row["key"] not in text
    tooltip = visible()[0].find_element("css selector", "tr[title]").get_attribute("title")
    assert tooltip.startswith("row ") and "commit" in tooltip
    safe_bits = browser.find_element("xpath", "//h2[text()='Minimum safe bits']/following-sibling::table[1]")
    behind = safe_bits.find_element("css selector", "tbody tr").get_attribute("title")  # every cell of the line
    assert sorted(re.findall(r"\b[0-9a-f]{24}\b", behind)) == sorted(rows["key"])  # both seeds' fp32/int8/int3 rows
    assert "commit" in behind
    figures = browser.find_elements("css selector", "figure img")
    assert figures and all(f.get_attribute("src").startswith("data:image/svg+xml;base64,") for f in figures)
    assert all(browser.execute_script("return arguments[0].naturalWidth", f) > 100 for f in figures)
    assert [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"] == []
    headings = [h.text for h in browser.find_elements("tag name", "h2")]
    assert "Reward and E% per variant" in headings and "ActorQ" not in headings and "Deployment" not in headings


def test_report_on_an_empty_store_is_one_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    with ResultStore(path) as store:
        assert store._connection  # the schema, no rows: what a sweep stopped before its first row leaves
    assert path.is_file()
    for html in (("--html",), ()):  # the same answer with or without --html
        code, _, err = cli("report", "--store", path, "--out", tmp_path / "out", *html)
        assert code == 2 and "holds no rows" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_every_figure_the_report_writes_is_on_the_page(cli, tmp_path: Path) -> None:
    """Run, per-layer sensitivity and fidelity rows of one torch policy: each figure file the report writes (the
    sensitivity heatmap and fidelity curves included, which the page used to leave out) is embedded once."""
    module = tmp_path / "policy.py"
    module.write_text(
        "import torch\nfrom torch import nn\n\n\ndef make():\n    torch.manual_seed(0)\n"
        "    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))\n"
    )
    agent = ("--policy-module", f"{module}:make", "--env", "CartPole-v1", "--store", tmp_path / "q.sqlite")
    for command in (
        ("run", "--bits", "32", "8", "4"),
        ("sensitivity", "--bits", "4"),
        ("fidelity", "--bits", "8", "4"),
    ):
        code, _, err = cli(*command, *agent, "-n", "3")
        assert code == 0, err
    out = tmp_path / "report"
    code, _, err = cli("report", "--store", tmp_path / "q.sqlite", "--out", out, "--html")
    assert code == 0, err
    page = (out / "report.html").read_text()
    figures = sorted(p.stem for p in out.glob("*.svg") if not p.stem.endswith("_grid"))
    assert any(f.startswith("sensitivity_") for f in figures) and any(f.startswith("fidelity_") for f in figures)
    assert all(page.count(f'alt="{stem}"') == 1 for stem in figures), figures
