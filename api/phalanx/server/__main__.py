from phalanx.server.main import main

main()
