from tracelens.cli import main

main()
