"""A host program's locale (setlocale, as a GUI toolkit or a notebook may call it) changes no number
resident writes or reads: the profile's JSON stays JSON, op texts read '.' as the decimal point."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent("""
    import json, locale, re, sys
    import numpy as np
    import resident as rs
    locale.setlocale(locale.LC_ALL, sys.argv[1])
    assert locale.localeconv()["decimal_point"] == ","
    with rs.profile() as p:
        rs.op.sqrt()(np.ones(1000))
    assert json.loads(p.json())["sites"]
    assert re.search(r"[0-9],[0-9]+ ?(GB/s|us|ms|s|MiB|KiB|B)[ )]", p.table()) is None, p.table()
    assert rs.op.parse("add(1.5)").name == rs.op.add(1.5).name
    try:
        rs.op.parse("affine(1,5, 0,5)")
        raise SystemExit("a comma decimal was read")
    except rs.InvalidArgument:
        pass
    print("ok")
""")


def comma_locale(tmp_path):
    """(name, environment) of a locale with ',' as its decimal point: one installed, else one built."""
    for name in ("de_DE.UTF-8", "fr_FR.UTF-8", "de_DE.utf8"):
        r = subprocess.run([sys.executable, "-c", f"import locale; locale.setlocale(locale.LC_ALL, '{name}')"],
                           capture_output=True)
        if r.returncode == 0:
            return name, dict(os.environ)
    localedef = shutil.which("localedef")
    if localedef is None or not os.path.isdir("/usr/share/i18n/locales"):
        pytest.skip("no locale with a decimal comma is installed and localedef cannot build one")
    folder = tmp_path / "locales"
    folder.mkdir()
    r = subprocess.run([localedef, "-i", "de_DE", "-f", "UTF-8", str(folder / "de_DE.UTF-8")], capture_output=True)
    if not (folder / "de_DE.UTF-8").exists():
        pytest.skip(f"localedef could not build de_DE.UTF-8: {r.stderr.decode(errors='replace')[:200]}")
    return "de_DE.UTF-8", dict(os.environ, LOCPATH=str(folder))


def test_numbers_ignore_the_c_locale(tmp_path):
    name, env = comma_locale(tmp_path)
    env.pop("RESIDENT_DEVICE", None)
    r = subprocess.run([sys.executable, "-c", CHECK, name], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
