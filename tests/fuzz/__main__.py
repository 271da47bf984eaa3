from tests.fuzz.harness import main

raise SystemExit(main())
