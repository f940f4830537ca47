"""The live session: the liquid simulated in the viewport while the artist works.

* :mod:`.session` -- the engine side, a child process advancing one displayed frame at a time
  (``python -m engine.live.session run ...``);
* :mod:`.channel` -- the shared memory between the host and the engine process.
"""
