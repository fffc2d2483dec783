"""report.html, `compare`, `sweep` and `report RUN_DIR` with a scripted LM (control flow and page
content), and the page in a real headless Chromium (loads without console errors, table and plots
visible, corpus and model text shown as text, never run)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from flarebench.bench.html import embed_json
from flarebench.bench.metrics import column_docs
from flarebench.bench.plots import pareto_front
from flarebench.strategies.registry import SpecError, with_param
from tests.scripted import ProbeAwareLM, ScriptedLM, run_cli

PAYLOAD = "<script>alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
CLOSER = "</script><script>window.__pwned=2</script>"


def _hostile_set(root: Path) -> Path:
    """A probe folder whose corpus, questions and gold answers hold markup and script."""
    folder = root / "hostile"
    folder.mkdir()
    docs = [
        {"id": "d1", "title": f"Evil {IMG}", "text": f"Ann wrote the book. {PAYLOAD} {CLOSER} & more."},
        {"id": "d2", "title": "Plain", "text": "The book was written in Paris by Ann."},
        {"id": "d3", "title": "Other", "text": "Bob lives in Rome."},
    ]
    probes = [
        {"id": "q1", "question": f"Who wrote {PAYLOAD}?", "answers": ["Ann"], "gold_doc_ids": ["d1"]},
        {"id": "q2", "question": "Where was the book written?", "answers": ["Paris"], "gold_doc_ids": ["d2"]},
    ]
    for name, records in (("corpus.jsonl", docs), ("probes.jsonl", probes)):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory) -> Path:
    """A `compare` run of single_time and flare_direct on the hostile set; the model's output holds
    script too, and one draft token is below theta."""
    root = tmp_path_factory.mktemp("hostile")
    lm = ScriptedLM([([" Ann wrote ", CLOSER, " it.", " So the answer is Ann."], [0.95, 0.1, 0.9, 0.99])])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
        code, out, err = run_cli(
            "compare",
            "--probes",
            str(_hostile_set(root)),
            "--strategy",
            "single_time",
            "--strategy",
            "flare_direct",
            "--report-dir",
            str(root / "run"),
        )
    assert code == 0, out + err
    return root / "run"


def _embedded(page: str) -> dict:
    m = re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "no embedded trace data"
    return json.loads(m.group(1))


def test_pareto_front_keeps_only_undominated_points():
    cost = [1.0, 2.0, 3.0, 2.5, 4.0, float("nan")]
    quality = [0.1, 0.3, 0.2, 0.3, 0.5, 0.9]
    # (3.0, 0.2) and (2.5, 0.3) are beaten by (2.0, 0.3); the NaN point never qualifies.
    assert pareto_front(cost, quality) == [0, 1, 4]
    assert pareto_front([1.0, 1.0], [0.2, 0.4]) == [1]  # same cost: only the better one
    assert pareto_front([], []) == []


def test_embedded_json_cannot_close_the_script_element():
    data = {"t": PAYLOAD + CLOSER + "<!-- & \u2028"}
    text = embed_json(data)
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == data


def test_report_escapes_every_piece_of_corpus_and_model_text(hostile_run):
    page = (hostile_run / "report.html").read_text()
    for raw in (PAYLOAD, IMG, CLOSER, "<img src=x", "alert(1)<"):
        assert raw not in page, raw
    assert page.count("<script") == 2  # the trace data and the viewer, nothing else
    data = _embedded(page)
    assert data["docs"]["d1"][0] == f"Evil {IMG}" and PAYLOAD in data["docs"]["d1"][1]
    assert any(PAYLOAD in p["question"] for p in data["probes"])
    assert any(CLOSER in t["output"] for t in data["traces"])


@pytest.mark.parametrize(
    "name",
    [
        *["plain", "P`<img src=x onerror=alert(1)>`[x](javascript:alert(1))", "`x``", "a ``` b"],
        *["S\n<script>alert(1)", "S\n# heading"],  # a line of its own could start a block
    ],
)
def test_a_name_in_summary_md_is_a_code_span_it_cannot_close(name):
    # A probe folder's name closed the span: what followed rendered as HTML in a Markdown viewer.
    from markdown_it import MarkdownIt

    from flarebench.bench.markdown import code

    rendered = MarkdownIt().render(f"Probe set {code(name)}, LM x.")
    shown = html.escape(name.replace("\n", " "), quote=False)
    assert rendered == f"<p>Probe set <code>{shown}</code>, LM x.</p>\n"


def test_report_holds_table_plots_definitions_and_configuration(hostile_run):
    page = (hostile_run / "report.html").read_text()
    table = pd.read_html(io.StringIO(page), attrs={"id": "summary"})[0]
    # compare runs its never and always bounds too, and ends with the oracle row (no strategy: not viewed).
    specs = ["no_retrieval", "single_time", "flare_direct", "flare_direct:theta=1"]
    assert list(table["strategy"]) == [*specs, "oracle"]
    assert table["bound"].fillna("").tolist() == ["never", "", "", "always", "oracle"]
    assert _embedded(page)["order"] == specs
    assert "f1 vs single_time" in table.columns  # the bootstrap delta against the reference
    full = pd.read_html(io.StringIO(page), attrs={"id": "summary-full"})[0]
    summary = pd.read_csv(hostile_run / "summary.csv")
    assert list(full.columns) == list(summary.columns)
    for fig in ("plot-cost", "plot-latency", "plot-latency-dist", "plot-gate"):
        m = re.search(rf'<figure id="{fig}"[^>]*><img src="data:image/png;base64,([^"]+)"', page)
        assert m, fig
        assert base64.b64decode(m.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert "plot-sweep" not in page  # not a sweep
    for column in summary.columns:
        assert f"<dt>{column}</dt>" in page and column_docs()[column][:40].replace("'", "&#x27;") in page
    assert "&quot;prompt_sha256&quot;" in page  # the configuration, escaped
    run = json.loads((hostile_run / "run.json").read_text())
    assert run["study"] == {"kind": "compare"}


@pytest.mark.slow
def test_report_command_rebuilds_the_same_page_from_traces(hostile_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(hostile_run, copy)
    before = (copy / "report.html").read_text()
    for name in ("report.html", "summary.csv", "summary.md"):
        (copy / name).unlink()
    code, out, err = run_cli("report", str(copy))
    assert code == 0, out + err
    assert f"report: {copy / 'report.html'}" in out
    assert (copy / "report.html").read_text() == before
    assert (copy / "summary.csv").read_text() == (hostile_run / "summary.csv").read_text()


def test_report_of_a_partial_run(hostile_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(hostile_run, copy)
    first = (copy / "traces.jsonl").read_text().splitlines()[0]
    (copy / "traces.jsonl").write_text(first + "\n")
    code, out, err = run_cli("report", str(copy))
    assert code == 0, out + err
    page = (copy / "report.html").read_text()
    data = _embedded(page)
    assert len(data["traces"]) == 1 and [p["id"] for p in data["probes"]] == ["q1"]
    # One strategy has finished: its single point trades nothing off, so the page says why the
    # trade-off plots are missing; the latency distribution is still drawn.
    assert 'id="plot-cost"' not in page and 'id="plot-latency"' not in page
    assert "No trade-off plots: F1 against cost and against p95 latency need two or more strategies" in page
    assert 'id="plot-latency-dist"' in page


@pytest.mark.slow
def test_report_of_an_answer_that_is_missing_or_failed(hostile_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(hostile_run, copy)
    traces = [json.loads(line) for line in (copy / "traces.jsonl").read_text().splitlines()]
    traces[0].update(output="", answer=None, steps=[])
    traces[1].update(output="", answer=None, steps=[], stop_reason="error", error="LMError: server said no")
    (copy / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in traces))
    code, out, err = run_cli("report", str(copy))
    assert code == 0, out + err
    shown = _embedded((copy / "report.html").read_text())["traces"]
    assert [t["answer"] for t in shown[:2]] == [None, None] and shown[1]["error"] == "LMError: server said no"


def test_report_of_a_missing_run_is_one_line(tmp_path):
    code, out, err = run_cli("report", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "run.json: not found" in err


@pytest.fixture
def probe_aware(monkeypatch):
    lm = ProbeAwareLM()
    monkeypatch.setattr("flarebench.bench.recipe.make_lm", lambda *args, **kwargs: lm)
    return lm


@pytest.mark.slow
def test_sweep_runs_one_spec_per_value_and_plots_against_it(tmp_path, probe_aware):
    run_dir = tmp_path / "sweep"
    code, out, err = run_cli(
        "sweep", "--strategy", "flare_direct", "--param", "theta=0,1", "--limit", "4", "--report-dir", str(run_dir)
    )
    assert code == 0, out + err
    summary = pd.read_csv(run_dir / "summary.csv")
    assert list(summary["strategy"]) == ["flare_direct:theta=0", "flare_direct:theta=1"]
    assert list(summary["retrieval_rate"]) == [0.0, 1.0]  # the paper's Figure 5 end points
    assert set(summary["delta_reference"]) == {"flare_direct:theta=0"}  # deltas against the first value
    run = json.loads((run_dir / "run.json").read_text())
    assert run["study"] == {"kind": "sweep", "param": "theta", "values": ["0", "1"], "strategies": ["flare_direct"]}
    page = (run_dir / "report.html").read_text()
    assert '<figure id="plot-sweep" class="wide">' in page
    assert "flarebench sweep: phantomwiki, flare_direct over theta" in page
    assert "[1/2] flare_direct:theta=0" in err and "[2/2] flare_direct:theta=1" in err  # progress names the spec
    findings = re.search(r'<section id="findings">(.*?)</section>', page, re.S).group(1)
    assert "flare_direct: the retrieval rate rises with theta (0.000 at theta=0 -&gt; 1.000 at theta=1)" in findings
    assert "Pareto front of F1 against tokens per question" in findings
    # A plain run of the same specs on the same probes resumes the folder as the sweep it is.
    specs = ["--strategy", "flare_direct:theta=0", "--strategy", "flare_direct:theta=1"]
    code, out, err = run_cli("run", *specs, "--limit", "4", "--report-dir", str(run_dir))
    assert code == 0 and "nothing to run" in err, err
    assert json.loads((run_dir / "run.json").read_text())["study"] == run["study"]
    assert '<figure id="plot-sweep" class="wide">' in (run_dir / "report.html").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sweep", "--param", "theta=0,1"], "sweep needs --strategy SPEC"),
        (["sweep", "--strategy", "flare_direct", "--param", "theta"], "--param: expected NAME=V1,V2,..."),
        (["sweep", "--strategy", "flare_direct", "--param", "theta=0,0"], "a value is given twice"),
        (["sweep", "--strategy", "flare_direct", "--param", "theta=0.2,0.20"], "a value is given twice"),
        (["sweep", "--strategy", "flare_direct", "--param", "theta=0.1,,0.2"], "--param: an empty value in"),
        (
            ["sweep", "--strategy", "flare_direct", "--param", "k=1", "--param", "max_tokens=8,16"],
            "--param is given 2 times; a sweep varies one parameter",
        ),
        (["sweep", "--strategy", "flare_direct:theta=0.5", "--param", "theta=0,1"], "sets 'theta' already"),
        (["sweep", "--strategy", "flare_direct", "--param", "tehta=0,1"], "has no parameter 'tehta'"),
        (["sweep", "--strategy", "flare_direct", "--param", "theta=0,2"], "theta must be within [0, 1]"),
        (["compare", "--strategy", "single_time"], "compare needs at least two different strategies"),
        (
            ["compare", "--strategy", "single_time", "--strategy", "single_time"],
            "got single_time (given more than once; a spec runs once)",
        ),
        (
            ["compare", "--strategy", "single_time", "--strategy", "single_time:k=3"],
            "single_time:k=3 is single_time again (the same strategy and parameters): give it once",
        ),
        (
            ["run", "--strategy", "flare_direct:theta=0.5,beta=0.4", "--strategy", "flare_direct:beta=0.40,theta=.5"],
            "flare_direct:beta=0.40,theta=.5 is flare_direct:theta=0.5,beta=0.4 again",
        ),
        (
            ["compare", "--strategy", "all", "--seed", "4"],
            "--seed needs --budget (METRIC<=VALUE, METRIC>=VALUE or METRIC=VALUE)",
        ),
        (
            ["compare", "--strategy", "all", "--dev-fraction", "0.5"],
            "--dev-fraction needs --budget (METRIC<=VALUE, METRIC>=VALUE or METRIC=VALUE)",
        ),
    ],
)
def test_study_usage_errors_are_one_line(args, message, probe_aware):
    code, out, err = run_cli(*args)
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_with_param_adds_a_parameter_to_a_spec():
    assert with_param("flare_direct", "theta", "0.2") == "flare_direct:theta=0.2"
    assert with_param("flare_direct:beta=0.3", "theta", "1") == "flare_direct:beta=0.3,theta=1"
    with pytest.raises(SpecError, match="sets 'theta' already"):
        with_param("flare_direct:theta=0.1", "theta", "1")


# ------------------------------------------------------------------------------------------
# The page in a real browser: Debian's chromium, driven by selenium through chromium-driver.
# ------------------------------------------------------------------------------------------

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
# No network here: these keep Chromium from reaching out (docs/design.md, Running offline).
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--window-size=1280,1600",
)


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "the browser tests need Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
    )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.mark.slow
def test_report_in_a_real_browser(browser, hostile_run):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get((hostile_run / "report.html").resolve().as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    table = browser.find_element(By.ID, "summary")
    assert table.is_displayed() and len(table.find_elements(By.CSS_SELECTOR, "tbody tr")) == 5  # 4 specs, oracle
    images = browser.find_elements(By.CSS_SELECTOR, "figure img")
    assert len(images) == 4
    for img in images:
        assert img.is_displayed()
        assert browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0;", img)
    # The viewer shows the first probe: its hostile question, docs and output appear as text.
    view = browser.find_element(By.ID, "trace-view")
    text = view.get_attribute("textContent")
    assert f"Who wrote {PAYLOAD}?" in text and CLOSER in text and f"Evil {IMG}" in text
    assert view.find_elements(By.CSS_SELECTOR, "script, img") == []
    Select(browser.find_element(By.ID, "strategy-select")).select_by_value("flare_direct")
    low = view.find_elements(By.CSS_SELECTOR, ".low")
    assert low and low[0].get_attribute("title") == "p = 0.1"  # the token below theta, highlighted
    Select(browser.find_element(By.ID, "probe-select")).select_by_value("q2")
    assert "Where was the book written?" in view.get_attribute("textContent")
    assert browser.execute_script("return window.__pwned === undefined;")
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check that no alert is open
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_gate_caption_names_the_trigger_beyond_min_prob():
    import pandas as pd

    from flarebench.bench.html import _gate_figure

    rows = pd.DataFrame(
        {
            "strategy": ["f"] * 4,
            "em": [1.0, 0.0, 1.0, 0.0],
            "gate_score": [0.5, 2.5, 0.7, 3.0],
            "gate_threshold": [2.0] * 4,
            "gate_trigger": ["entropy"] * 4,
        }
    )
    entropy = _gate_figure(rows, ["f"])
    assert "least confident score of its trigger" in entropy and "theta" not in entropy
    theta = _gate_figure(
        rows.assign(gate_trigger="min_prob", gate_score=[0.9, 0.2, 0.95, 0.1], gate_threshold=0.8), ["f"]
    )
    assert "The lowest token probability" in theta


def test_a_small_cost_per_question_keeps_its_significant_digits_in_every_table():
    # A hosted model's cost per question is often below 0.001: at 3 decimals it would read 0.000, free.
    from flarebench.bench.html import _table
    from flarebench.bench.report import format_table

    summary = pd.DataFrame(
        {"strategy": ["single_time", "flare_direct", "no_retrieval"], "em": [0.15, 0.1, None],
         "cost_per_q": [0.0002992, 0.00204654, 0.0]}
    )  # fmt: skip
    text = format_table(summary)
    assert "0.000299" in text and "0.002047" in text and "0.150" in text
    page = _table(summary, "summary")
    assert "<td>0.000299</td>" in page and "<td>0.002047</td>" in page and "<td>0.150</td>" in page
    assert "<td>0.000000</td>" in page and "nan" not in page  # a free strategy; an empty em
    free = summary.assign(cost_per_q=0.0)  # a local model's run: the usual 3 decimals
    assert "|        0.000 |" in format_table(free)
    # A calibration to a cost goal: how far the test figure is off is in that unit too.
    goal = pd.DataFrame({"strategy": ["flare_direct"], "test_cost_per_q": [0.002024], "off_by": [-0.000976]})
    assert "-0.000976" in format_table(goal)
