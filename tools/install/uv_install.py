"""``uv pip install`` into this interpreter, with what pip's settings say.

uv does not read pip's configuration: where pip has a local index,
find-links or constraints, uv would resolve against other packages. This
passes it those of ``pip config list`` (files and ``PIP_*`` variables) and
the certificate bundle.

Usage: python tools/install/uv_install.py [uv pip install arguments],
with uv installed in the same environment (``pip install uv``).
"""

import ast
import os
import subprocess
import sys

# pip option -> uv option; the values of the list options are
# whitespace-separated, as in pip's configuration files
LISTS = {
    'extra-index-url': '--extra-index-url',
    'find-links': '--find-links',
    'constraint': '--constraint',
}
SINGLE = {'index-url': '--index-url'}
FLAGS = {'no-index': '--no-index'}
# the sections pip reads for ``pip install``, lowest precedence first
SECTIONS = ('global', 'install', ':env:')


def pip_settings(listed: str) -> dict:
    """The settings of ``pip install`` from ``pip config list``'s lines
    (``section.name='value'``), the later sections overriding."""
    found = {}
    for line in listed.splitlines():
        key, _, value = line.partition('=')
        section, _, name = key.rpartition('.')
        if section in SECTIONS and value:
            found[(SECTIONS.index(section), name)] = ast.literal_eval(value)
    return {name: value for (_, name), value in sorted(found.items())}


def uv_options(settings: dict) -> list:
    # pip takes a package from whichever index has the best version; uv's
    # default takes it from the first index that lists it. pip writes the
    # .pyc files at install, uv only when asked: where
    # PYTHONDONTWRITEBYTECODE is set, every interpreter would compile what
    # it imports each time (a tool's start took 3x as long). Elsewhere the
    # interpreter writes them at the first import, of the 20-30% of an
    # environment's files that are ever imported.
    options = ['--index-strategy', 'unsafe-best-match']
    if os.environ.get('PYTHONDONTWRITEBYTECODE'):
        options.append('--compile-bytecode')
    for name, flag in SINGLE.items():
        if name in settings:
            options += [flag, settings[name]]
    for name, flag in LISTS.items():
        for value in settings.get(name, '').split():
            options += [flag, value]
    for name, flag in FLAGS.items():
        if settings.get(name, '').lower() in ('1', 'true', 'yes', 'on'):
            options.append(flag)
    return options


def main(argv: list) -> int:
    listed = subprocess.run(
        [sys.executable, '-m', 'pip', 'config', 'list'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    settings = pip_settings(listed)
    env = dict(os.environ)
    if 'cert' in settings:
        env.setdefault('SSL_CERT_FILE', settings['cert'])
    command = [sys.executable, '-m', 'uv', 'pip', 'install']
    command += ['--python', sys.executable, *uv_options(settings), *argv]
    return subprocess.run(command, env=env).returncode


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
