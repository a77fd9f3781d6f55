-- wrk script: POST a job spec; counts replies by status so the run can prove every 201.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"bench","entrypoint":["true"],"scaling_config":{"num_workers":1,"resources_per_worker":{"bench_never":1}}}'

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end
function init(args)
  created = 0
  other = 0
end
function response(status, headers, body)
  if status == 201 then created = created + 1 else other = other + 1 end
end
function done(summary, latency, requests)
  local c, o = 0, 0
  for _, t in ipairs(threads) do
    c = c + t:get("created")
    o = o + t:get("other")
  end
  io.write(string.format("created=%d other=%d\n", c, o))
end
