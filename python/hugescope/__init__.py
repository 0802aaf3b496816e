"""hugescope: which memory should be huge pages, and what does each huge-page
policy buy?

The Python layer is a thin front over the Rust core (``hugescope._core``):
simulations, trace generation and the real-Linux side all run in Rust; this
package turns their results into objects, pandas DataFrames, plots and reports.

Quick start::

    import hugescope as hs
    hs.workloads.trace("gups", "gups.hst", size="64MiB", updates=1_000_000)
    r = hs.simulate("gups.hst", preset="haswell-pcc", pages="4k")
    r.to_frame()          # one row per page size
    r["translation"]["walks"]
"""

from ._core import HugescopeError, presets
from ._core import version as _version
from .results import RegionProfile, SimResult
from .api import compare, machine_config, policies, region_profile, simulate, trace_info
from .configuration import Config, load as config
from . import workloads
from .ingens_study import ingens_studies
from .navarro_study import navarro_studies
from .virt_study import virt_studies

__version__ = _version()

__all__ = [
    "HugescopeError",
    "SimResult",
    "RegionProfile",
    "simulate",
    "region_profile",
    "compare",
    "policies",
    "trace_info",
    "machine_config",
    "config",
    "Config",
    "presets",
    "workloads",
    "ingens_studies",
    "navarro_studies",
    "virt_studies",
    "__version__",
]
