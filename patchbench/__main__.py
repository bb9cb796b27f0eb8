from patchbench.cli import program

program()
