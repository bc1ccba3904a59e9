"""`phalanx.resume`: resumability for any torch script (see `phalanx.resume.run.Resumable`).

The in-pod library: the reference trainer uses it, and so can a user's script, in Phalanx's image
or (injected with the agent, needing only the image's torch) in any other. It imports torch and
the standard library, never pydantic or the rest of Phalanx.
"""

from phalanx.resume.run import Resumable
from phalanx.resume.sampler import GlobalSampler
from phalanx.resume.settings import CheckpointSettings, SettingsError

__all__ = ["CheckpointSettings", "GlobalSampler", "Resumable", "SettingsError"]
