// fork() in a traced process: the shim's one pthread_atfork registration.
// Each part of the shim that holds locks or threads (capture windows, the
// control listener, CUPTI collection, the event channel) joins with its own
// hooks, when it first comes into use; the handlers here run the hooks of
// the parts that joined, in one order: prepare takes the parts' locks from
// the outermost (capture windows: an edge holds its lock while it switches
// CUPTI and sends an event) to the innermost (the event channel), and the
// parent and child hooks release them in reverse.  With one registration
// per part, the order followed which part came into use first, and a fork
// could take the channel's lock before the capture lock that a thread
// holding it was waiting on.
#pragma once

namespace gpuos_shim {

// In lock order, outermost first.
enum class ForkPart { kCaptureWindows, kControlListener, kCuptiCollection, kEventChannel };

struct ForkHooks {
  void (*prepare)();  // take the part's locks
  void (*parent)();   // release them in the parent
  void (*child)();    // release them, and drop what the parent's threads own
};

// `part` takes part in every fork from now on.  Once per part; a later
// call for the same part is ignored.  Never call it with a lock held that
// a prepare hook takes (it may wait for a fork in progress).
void JoinForkHandling(ForkPart part, ForkHooks hooks);

}  // namespace gpuos_shim
