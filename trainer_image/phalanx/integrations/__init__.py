"""One-line progress for training frameworks: `phalanx.integrations.lightning` (PyTorch
Lightning) and `phalanx.integrations.huggingface` (the Hugging Face `Trainer`). Each is a callback
that calls `phalanx.progress` from the framework's own hooks, so a job shows steps, loss,
throughput, goodput and recovery like the reference trainer's. They import their framework only
when used, and ship in the injected agent's zipapp: an image the agent was injected into imports
them without a pip install."""
