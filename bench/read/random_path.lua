-- wrk script: GET a path with {id} replaced by a random player id in 1..MAX_PLAYER.
-- Usage: wrk -s random_path.lua URL -- "/api/.../players/{id}" MAX_PLAYER
local template, max_player
function init(args)
  template = args[1]
  max_player = tonumber(args[2])
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end
function request()
  local path = string.gsub(template, "{id}", tostring(math.random(1, max_player)))
  return wrk.format("GET", path)
end
