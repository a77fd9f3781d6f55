-- wrk script: adds the bearer token from the TRAINYARD_TOKEN environment variable.
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TRAINYARD_TOKEN")
