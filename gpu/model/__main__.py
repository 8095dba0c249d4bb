from ksearch.gpu.model.main import main

raise SystemExit(main())
