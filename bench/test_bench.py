"""The bench: one test per strategy spec (``pytest bench --strategy SPEC``).

A strategy's test fails when it refuses to run on this backend, when any probe ended in an
error, or, under ``--gate FILE``, when its metrics break a tolerance of the baseline (one line per
broken metric). With pytest-benchmark active it also times one fixed probe (``bench_timing``).
"""


def test_strategy(spec, run_spec, bench_timing, bench_gate, bench_session):
    traces = run_spec(spec)
    assert traces, f"{spec}: no probe was run"
    bench_timing(spec)
    errors = [t for t in traces if t.error]
    assert not errors, (
        f"{spec}: {len(errors)} of {len(traces)} probes failed; first: {errors[0].probe_id}: {errors[0].error}"
        + (f"; {hint}" if (hint := bench_session.retry_hint()) else "")
    )
    bench_gate(spec)
