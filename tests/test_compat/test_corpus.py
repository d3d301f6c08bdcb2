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
    fill,
    get,
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
    for name, value in case.env:
        monkeypatch.setenv(name, fill(value, written.fields))
    theirs = resolve_host(case.tool, written.argv, case.host)
    if case.refused:
        with pytest.raises(Refused) as refusal:
            resolve_ours(case.tool, written.argv)
        refusal = str(refusal.value)
        assert refusal.startswith('exit 2: ') and case.refused in refusal
        assert len(refusal.splitlines()) == 1, refusal
        return
    ours, warned = resolve_ours(case.tool, written.argv)
    assert unexplained(ours, theirs, written.argv) == []
    for key, value in case.holds:
        if isinstance(value, str):
            value = fill(value, written.fields)
        assert (get(ours.to_dict(), key), get(theirs.to_dict(), key)) == (
            value,
            value,
        ), key
    # a file variable given by --cfg-options: one line names every key
    # that keeps the value it was read with
    stale = [line for line in warned if line.startswith('--cfg-options ')]
    if case.stale:
        assert len(stale) == 1 and '\n' not in stale[0], warned
        assert [key for key in case.stale if key not in stale[0]] == []
    else:
        assert stale == []
    if case.warns:
        lines = [line for line in warned if line.startswith(case.warns)]
        assert len(lines) == 1 and '\n' not in lines[0], warned
    runner = build_runner(ours)
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
