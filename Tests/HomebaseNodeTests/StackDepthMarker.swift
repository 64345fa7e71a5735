import Glibc

/// The address of a local in the caller's frame: where the stack stands at the call (it grows downwards).
///
/// Under AddressSanitizer (`tools/test --sanitize address`) locals live on its "fake stack" (frames on the heap,
/// for use-after-return detection), whose addresses say nothing about depth: there the runtime is asked for the
/// real frame the fake one stands for. Its two entry points exist only in a sanitized process, hence dlsym.
@inline(never)
func stackDepthMarker() -> Int {
    var local = 0
    return withUnsafeMutablePointer(to: &local) { pointer in
        if let asan = AddressSanitizerFakeStack.shared,
            let real = asan.realFrame(asan.current(), UnsafeMutableRawPointer(pointer), nil, nil)
        {
            return Int(bitPattern: real)
        }
        return Int(bitPattern: pointer)
    }
}

/// `__asan_get_current_fake_stack` and `__asan_addr_is_in_fake_stack`, when the process has them.
private struct AddressSanitizerFakeStack: @unchecked Sendable {  // two C function pointers, never written
    typealias Current = @convention(c) () -> UnsafeMutableRawPointer?
    typealias RealFrame = @convention(c) (
        UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?,
        UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) -> UnsafeMutableRawPointer?

    let current: Current
    let realFrame: RealFrame

    static let shared: AddressSanitizerFakeStack? = {
        let process = dlopen(nil, RTLD_NOW)
        guard let current = dlsym(process, "__asan_get_current_fake_stack"),
            let realFrame = dlsym(process, "__asan_addr_is_in_fake_stack")
        else { return nil }
        return AddressSanitizerFakeStack(current: unsafeBitCast(current, to: Current.self),
                                         realFrame: unsafeBitCast(realFrame, to: RealFrame.self))
    }()
}
