"""The bridge between Blender and the engine: the only code that reads the scene or writes Blender data.

* :mod:`.export` turns the Blender scene into an engine scene description and settings;
* :mod:`.files` knows the cache folder and which files in it are Surge's;
* :mod:`.process` runs the engine's command line in a child process and reads its progress;
* :mod:`.usd` writes baked frames as USD point files (no Blender data involved);
* :mod:`.liquid` creates or updates the object that plays those files back;
* :mod:`.bake` ties them together for the operators.
"""
