"""Not part of the tilecore package: the repository root's marker (issue 16 item 18).

`git clone <url>` names the clone `tilecore/`. Without this file, a script next to such a
clone that runs `import tilecore` gets the clone as an empty namespace package (Python scans
the script's folder first, and the editable install's finder is asked only when no path entry
has the name), so `tilecore.jit` is missing. With it, the clone is a regular package whose only
work is to hand the import over: to the installed tilecore when there is one (the clone never
shadows it), else to the package inside this clone (`<clone>/tilecore`).

Only a folder *above* the repository root imports this file; from the root itself (the
README's commands, pytest) `import tilecore` finds `tilecore/` directly.
"""

import importlib
import importlib.util
import os
import sys


def _hand_over() -> None:
    """Replace this module in `sys.modules` by the installed tilecore, or by the clone's own
    package when none is installed; the import system returns what `sys.modules` holds."""
    name = __name__
    clone = os.path.dirname(os.path.abspath(__file__))
    parent = os.path.dirname(clone)
    me = sys.modules.pop(name)
    saved = sys.path[:]
    # every path entry but the clone's parent folder ("" and "." are the working directory)
    sys.path[:] = [p for p in saved if os.path.abspath(p or os.curdir) != parent]
    try:
        importlib.import_module(name)
        return
    except ImportError:
        sys.modules.pop(name, None)
    finally:
        sys.path[:] = saved
    inner = os.path.join(clone, "tilecore")
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(inner, "__init__.py"), submodule_search_locations=[inner])
    if spec is None or spec.loader is None:  # pragma: no cover - a clone always has its package
        sys.modules[name] = me
        raise ImportError(f"{clone} is a tilecore clone without its package folder",
                          name=name, path=clone)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


if __name__ == "tilecore":
    _hand_over()
