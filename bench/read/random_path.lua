-- wrk script: GET a path with {id} replaced by a random player id in OFFSET+1..OFFSET+MAX_PLAYER.
-- Usage: wrk -s random_path.lua URL -- "/api/.../players/{id}" MAX_PLAYER [OFFSET]
local template, max_player, offset
function init(args)
  template = args[1]
  max_player = tonumber(args[2])
  offset = tonumber(args[3] or "0")
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end
function request()
  local path = string.gsub(template, "{id}", tostring(offset + math.random(1, max_player)))
  return wrk.format("GET", path)
end
