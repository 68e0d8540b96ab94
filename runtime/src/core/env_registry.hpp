// Internal: the registry's declaration (see env_registry.cpp for the table itself).
#pragma once

#include "tenax/env.hpp"
