from ksearch.server.cli.main import main

main()
