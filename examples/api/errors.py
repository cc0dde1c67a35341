"""Errors from the Python API name the arguments, and suggest close names.

python examples/api/errors.py
"""

import megha
from megha.errors import MeghaError

for call in (
    lambda: megha.simulate(scheduler="sparow", trace="sample:YH_small", workers=100),
    lambda: megha.simulate(scheduler="megha", trace="sample:YH_smal", workers=100),
    lambda: megha.simulate(scheduler="megha", trace="sample:YH_small", workers=100, cluster="sample:megha_G1L1S9"),
    lambda: megha.simulate(scheduler="megha", trace="sample:YH_small", workers=0),
    lambda: megha.simulate(scheduler="megha", trace="sample:YH_small", workers=100, polcy="random"),
):
    try:
        call()
    except MeghaError as e:
        print(f"{type(e).__name__}: {e}")
