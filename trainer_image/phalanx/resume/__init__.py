"""`phalanx.resume`: resumability for any torch script (see `phalanx.resume.run.Resumable`).

The in-pod library: the reference trainer uses it, and so can a user's script, in Phalanx's image
or (injected with the agent, needing only the image's torch) in any other. It imports torch and
the standard library, never pydantic or the rest of Phalanx. Its oldest torch is checked first
(`compat`).
"""

import torch

from phalanx.resume.compat import require_torch

require_torch(torch.__version__)  # before the modules that import what an older torch lacks

from phalanx.resume.run import Resumable  # noqa: E402
from phalanx.resume.sampler import GlobalSampler  # noqa: E402
from phalanx.resume.settings import CheckpointSettings, SettingsError  # noqa: E402

__all__ = ["CheckpointSettings", "GlobalSampler", "Resumable", "SettingsError"]
