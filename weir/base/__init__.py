"""The shared base every layer of weir may import, and which imports no other part of weir:

- ``errors``: the one exception root (``WeirError``) and its subclass per area;
- ``paths``: paths from outside (flags, requests, metadata) kept inside their directory;
- ``files``: files weir writes for itself, private to the user and durable;
- ``lazy``: a package's functions kept when its submodules of the same name load late;
- ``logs``: logging set-up (text or JSON lines), done once per process;
- ``procmem``: a process's resident memory;
- ``redact``: URL passwords and secret settings as logs, ``/health``, ``--help`` and errors
  show them (``***``).

It sits under ``weir/`` itself rather than in one of the repository's top-level folders, so
``state/`` (which uses them) does not import ``engine/``, nor the runtime the command
line's ``app/``. Its modules import only the standard library.
"""
