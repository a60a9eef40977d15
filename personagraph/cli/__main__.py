from personagraph.cli import main

main()
