from legacy.run import main

main()
