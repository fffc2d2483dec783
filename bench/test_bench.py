"""The bench: one test per strategy spec (``pytest bench --strategy SPEC``).

A strategy's test fails when it refuses to run on this backend or when any probe ended in an
error; the other strategies' tests go on.
"""


def test_strategy(spec, run_spec):
    traces = run_spec(spec)
    assert traces, f"{spec}: no probe was run"
    errors = [t for t in traces if t.error]
    assert not errors, (
        f"{spec}: {len(errors)} of {len(traces)} probes failed; first: {errors[0].probe_id}: {errors[0].error}"
    )
