"""HTTP routes, one module per noun, each exposing `router = APIRouter()`; gateway/main.py includes them all."""
