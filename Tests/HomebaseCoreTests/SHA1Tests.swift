import Testing

@testable import HomebaseCore

@Suite struct SHA1Tests {
    /// RFC 3174 §7.3 test vectors (TEST1, TEST2, TEST3) plus the empty message.
    @Test func rfc3174Vectors() {
        #expect(Hex.encode(SHA1.hash(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(Hex.encode(SHA1.hash([UInt8]())) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        let message448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(Hex.encode(SHA1.hash(Array(message448.utf8))) == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
    }

    /// TEST3: one million repetitions of "a" (many blocks, bit length above 2^22).
    @Test func oneMillionA() {
        let digest = SHA1.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))
        #expect(Hex.encode(digest) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f")
    }

    /// Every length 0...130 crosses each padding case (55/56/63/64 bytes, two and three blocks). The message of
    /// length n is bytes (i * 7 + 3) & 0xFF for i in 0..<n; digests from Python's hashlib.sha1.
    @Test(arguments: 0...130) func matchesHashlibForLength(_ n: Int) {
        let message = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
        #expect(Hex.encode(SHA1.hash(message)) == Self.hashlibDigests[n])
    }

    /// Accepts any collection, not only arrays: a slice hashes like the array it views.
    @Test func sliceHashesLikeArray() {
        let bytes = Array("xxabcxx".utf8)
        #expect(SHA1.hash(bytes[2..<5]) == SHA1.hash(Array("abc".utf8)))
    }

    static let hashlibDigests: [String] = [
        "da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "9842926af7ca0a8cca12604f945414f07b01e13d",
        "1f5ae6b976eaa448d6756c593ceb816ac8799ef1",
        "4201de9f98cb0a9b8cf52398be7802b55d45266a",
        "a9ca94e2a9be52cdcef145facf2bad04e553cb0b",
        "941f194daa0adbdf8582dbf3691a6288329d2be6",
        "984329883856c39f7dd78b88bcfb49eefc9be989",
        "8f61e051db8f5bfa67d8eff0c40cf868f68e70bb",
        "cef03cc4db41ecf2c7956e8b06dc6b0b8015f260",
        "6cad7098fc6c42a32b5fe6536f157ff570772cd0",
        "a00e488320a5f5536afc79a976ec22cf7aebbd97",
        "0a3a1e6ce197c09607b8ddc9637dcaa223459182",
        "74c2e2bfd179cc0901f88ca7b8bed52ebcd7d849",
        "5b656bff036821f5174daba9580c139a6d74da15",
        "0b32b3246891c1ce11d68e4b5e803490a7cd1b63",
        "b02b80eaa1a78b076120457b296be0d347eeb194",
        "3bbec6217ac9bf7c9c4642b1bdeb3ae68d99f787",
        "2dbde31cfe98dd4a93eb056f157f8cabb01db443",
        "5cd1599bbf20aa54712f37bd18ae4b464c59d299",
        "90226ee11311d80cfae27605808403960856e50d",
        "57ab1094cc2a57d9f64818d2eb92750aab1bf177",
        "565cce1992fa0e88bf04e798764a6d2d26ea1dc3",
        "b7f16efc74e3224c94bc344c6bafabb7e11d977a",
        "fa9329dda1c904fb2c9ef99cdd87561526d80913",
        "1aae7a798319ed16a198e92401e7eed36cd1a51b",
        "9ade5333be4a9674e7ac5b12ddac8240f7783da2",
        "6d3ce948a92cfb30d8c9da8af8a088154549e0ea",
        "78440d05a24e2b53d2ee8a66c6d9507fc42cc431",
        "c9a77289303864dc3e15adf071745fef286a70b2",
        "96fb3a3053d47fd59e775fd21c27c3835f164188",
        "a97984db177660175eea1dbe18dbc376808b5ee3",
        "d21a51503aa50e23029493030a1d0704a84cb2ea",
        "64b5168088b6692cfd749ab0b699a8b5b225189b",
        "66f198bd988723981464f3e589667631c29d174d",
        "d828aab123a8df09bb66c6ff5d46e444e52225d8",
        "20d1062373e60ddb02daf0a2bb9dc4893a5a3482",
        "e84e44766b5f4cb28f9005a9bcc61f0414f7723f",
        "66787c668baba43a4574ca4db54cbb65f78fd9d5",
        "b82977dee0782cb1c424be3ca1b6fefa60ac600c",
        "9ac81eef4e53dfd5df78dc615f4685c18957b291",
        "211f8d2930f827e5c7a66cd81d79c1d2df12ea6b",
        "07db78a9a0bf346e34553dedd45854cb36df8185",
        "bc152a0c16257c31d861e4de5788878b02e18850",
        "42ffa53d886bdf8abb72fe633ec6bb176fca1047",
        "90963fb5f385b944c30a85cedc11f0c775314a29",
        "7e5ad6079ab50b53bd400c0bed369f5cca092881",
        "d23cd18dc6bb13fc18b37318035169d7daf3ecda",
        "5e3cf47f3d208b1dceb06f8a37e58236e5ad2fc0",
        "9aa97c403db44000cf9601a20a6e0d4fe4e94a01",
        "f873554e96c4fd00c3b3446c74005afe81d85b22",
        "996be45cd0e8a24b6eb052c5b174bad6c2151f03",
        "3e0ea15235a8dd08343c0ecbb2f7a3974f521857",
        "937beca28580f3ff31d4ef88653801349179ac7a",
        "f163c6b4b97324d118ed451c94625aef0d0a6fb6",
        "0617d0e2db51b03d5d09c217b3fe0643ed6d152f",
        "ddf57317ef34bfee3b6df83d359098930eb278bc",
        "a0d492bb0fc889d0eca3bc137066ab6f4f74f369",
        "11a02dcf95859677a62e75024067c22b165d890f",
        "3d6024b3f7b1c01a5c62497022ea6e33b89d2cf3",
        "5850f256241b06d25bc20b9dc85d7944ce96fa1a",
        "4a72dc48088734d6ee17cccbb158de29744e9733",
        "92b2db0c849997e88b21b8a509eecaa46f00c6b8",
        "363c4d8b28918eacfb4b945bafd31cb62997a5cd",
        "c55856749bef509bdfe6bfebfc7bf4e793e82132",
        "bede92be29c3874e1b54ddc77988d606fc857a8e",
        "b05a80522b053d6dc7e0a517d0e70212c7dad11f",
        "13e53bec6f6ee5a157a4f62ad14f702bf9f6d167",
        "8d39d341da28ed21be3ca08ec2cfb6c4a4be99ed",
        "3efec55489106fcde5552290bb4bc2bcda30f9ba",
        "831e22c83fef344e627b1d20181d77d0984fafea",
        "3e7e19ea8f559bd1f5c97e46f0ae082c4bcd6244",
        "b4d320ff238a99c0963778c340387bc1c61f5cd7",
        "191cf09722d8a449820c9c66b122b8434a68dcea",
        "c2234319c0056fe3d74053e1ce14faf00dee5df4",
        "2e96fc5182863f989f79ed28c46558295030d50d",
        "0afbbbe6e731ab70338bf972766211eacffd0e79",
        "4486860ad2702b492f17e07e43d99474964a6348",
        "7ad89da645724916b0e70f8db3fb48382d970867",
        "2a013aba1ee3deceddcdc2ed426f3bc26be4f94b",
        "6a6dfd5130d56d92374a53d0c03356da772a10aa",
        "de25ce79b8cf13016c12d081f399f9b427af4cbb",
        "c73933e543f4daeceb08b990f257a61e6139f039",
        "a0e9c80c67a1cc955341e50b6006b0690eaa8807",
        "22d464b043d3c8eb9025cb7497e4eacfe0aadb96",
        "1f2c174a3687d3b1118a138779f254273fc78f6c",
        "bd7be1e0cdb0a911bae7eef171d31bafb47435e8",
        "56e1fe537ae2c59e52eeee83b5efa9185b15dc5c",
        "2e114dfa3f54bf19f2d132aa8ec7521ef722bd35",
        "b0c561b691887c08a09879869f578afc6248b36a",
        "2b5f3e1bfd79e003926a6d743cb85c7543fed63c",
        "08e751b39f177186ac60873de02326e05b785eb6",
        "94afe1d3144f0288e2f3e86a2c831d6e5b1fd365",
        "2fefc0ee2f4f40f5946efe1ddcdeefd137c1c36d",
        "9410400eed4b3c11fc722cdd6211d33b4043e6cb",
        "cd7e7ea8dce332643b93d8899454c5e2ee5434da",
        "9e7bd6ac0eb591be8919e506dbf0725cb84a432e",
        "dec7fa16b8b6ec5a3515e4a746d0d66c2bdb44e1",
        "3a4f06a74c1e38308a0a8af4ecd22ccfc6d12948",
        "5c546fb0ff4593361b19b8f5eb2a9d36cf790911",
        "cf19877413ac8cb6c116536f3b8ea85523e6303e",
        "be7fd41586f415665d261af19613a4ba6f4346bb",
        "2ae428c5f5dfaff2dd18ce373895c4b0f63e71a4",
        "8b258ff38e0bec341461fe7a389c58e94a6902ff",
        "6c31104718ea0d8a5dddb0999465f4af5b5bbf91",
        "dfaa234fa35d3d5fc1b197a297e1cc85c4a7a474",
        "8f9a47272286be5b250b61a5b15f90b85caf6ac3",
        "bfd965ad51f29ca661470907f62394cd17b0c4e9",
        "7f5936f7be3cf34d607cfce675b831d27af2aa68",
        "23ecf83dabecb06b2b768dd0cd86ce1210e9e8e1",
        "5e48479854b5991bf840e23f7bbe55535e67a23c",
        "37e815835e4c8b9642d3b628de7051502befa59a",
        "4a01b1272627e5be00f57bc3c3029c23a452e629",
        "54c08c2a0ed21de25e3d8606c3929454eb1d3f8b",
        "9f359093c0426170a6d53fdfb89679b592d8ebac",
        "02a464094db5da39cf309cd80cf96dd18465599d",
        "fe35da50128fed6999d312c58d79f2324ecba58d",
        "11ee9de3ca106edcfcecc00f160d97e6b0cc33f7",
        "90b79e0bc3eb8d92af29b371e44e16d91a98cfa1",
        "55bfbde27c9acb13670a70e765a687b2da3435fc",
        "504e27376a6e0f0dba8295b85cb25dc4dfa17d23",
        "82134b02fb3f702491be9bed581eeab59334acb2",
        "f004a54c50aa3705ccc2f03f21016ca6a25755cb",
        "cfca83c0711fd2164e886c60ec33b69a7e9a68f0",
        "4753b07e7c0e0d418bed1370adca81d099a41e88",
        "3132eb444ed5ea62a86fb0a5a1159550e16ee30e",
        "a46f230aaf987f4db2bb3501116392e684d29b76",
        "35f63e21348461ef967e9f37207a56e62701218e",
        "34d5e582029e9b9b85b2febe31da3db7cdabaaea",
        "a09133e6730ffe899efb70204cb5646cd5dc24ee",
        "808aea332ce367541d37adae7f94e59c5c1a934e",
        "6e95f38fbdd38454ab4370ca87d628b526515950",
    ]
}
