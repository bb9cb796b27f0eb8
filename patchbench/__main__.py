from patchbench.cli import main

raise SystemExit(main())
