"""The ``sparkcdc`` command line.

Each top-level command lives in a module ``cmd_<name>.py`` exposing
``register(subparsers)``; ``sparkcdc cli <group>`` verbs live in
``cli_<group>.py`` modules with the same function. Both are discovered, so a
command is added by adding its file.

The top layer: may import everything; nothing imports it.
"""
