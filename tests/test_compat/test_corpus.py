"""Every case of the corpus through our tools and the host's (mmpretrain's,
or mmdet's and mmseg's for their configs): both read it, the resolved
configs are equal apart from the deliberate differences of
docs/compatibility.md, and the Runner the config names builds its loops,
optimizer and schedulers from ours."""

import pytest

from ..helpers import ROOT
from .corpus import (
    CASES,
    DELIBERATE,
    Refused,
    build_runner,
    prove_runner,
    resolve_host,
    resolve_ours,
    start_point,
    unexplained,
    write_case,
    write_data,
)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    return write_data(tmp_path_factory.mktemp('corpus_data'))


@pytest.fixture
def registries():
    """The registered classes as they were: a case's module may register
    over a stock name (classes registered since stay)."""
    from mmengine import registry as engine
    from mmpretrain import registry as pretrain

    kept = {
        reg: dict(reg._module_dict)
        for module in (engine, pretrain)
        for reg in vars(module).values()
        if isinstance(reg, engine.Registry)
    }
    yield
    for reg, modules in kept.items():
        reg._module_dict.update(modules)


@pytest.mark.parametrize('case', [case.param() for case in CASES])
def test_case(case, data, tmp_path, monkeypatch, registries):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    written = write_case(case, tmp_path, data)
    theirs = resolve_host(case.tool, written.argv, case.host)
    try:
        ours = resolve_ours(case.tool, written.argv)
        if case.check is not None:
            case.check(ours.to_dict(), theirs.to_dict(), written.fields)
        else:
            assert unexplained(ours, theirs, written.argv) == []
        runner = build_runner(ours)
    except (Refused, ValueError) as refusal:
        # a file variable that cannot reach its keys may be refused
        if not case.refusal_ok or case.refusal_ok not in str(refusal):
            raise
        assert len(str(refusal).strip().splitlines()) == 1, refusal
        return
    if case.loads is not ...:
        expected = case.loads
        if expected is not None:
            kind, path = expected
            expected = (kind, path.format(**written.fields))
        assert start_point(runner) == expected
    prove_runner(runner, case.tool, case.load)
    if case.then is not None:
        assert case.then(runner)


def test_the_deliberate_differences_are_documented():
    """Each difference the corpus accepts has its row, with its reason,
    in docs/compatibility.md."""
    page = (ROOT / 'docs' / 'compatibility.md').read_text()
    rows = [line for line in page.splitlines() if line.startswith('| `')]
    for difference in DELIBERATE:
        assert any(row.startswith('| ' + difference.row) for row in rows), (
            difference.row
        )
