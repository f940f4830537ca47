"""Files and processes: everything the engine reads from and writes to disk, and how a child
process reports.

* :mod:`.atomic` -- the one atomic writer for every file;
* :mod:`.cache` -- the cache folder: manifest, frames, ownership, clearing;
* :mod:`.lock` -- one writer per cache folder (``surge.lock``);
* :mod:`.checkpoint` -- the solver state at a frame, for resume;
* :mod:`.usd` -- USD files of baked frames (points and meshes);
* :mod:`.child` -- progress lines, cancel flag and resident memory of a child process.
"""
